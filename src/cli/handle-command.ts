import { WorkItemFailedError } from '../errors.js';
import { EnvironmentWorker, type ItemOutcome } from '../worker/environment-worker.js';
import type { Command } from './command.js';
import { cliLogger } from './cli-logger.js';
import { EXIT, EXIT_CODE_HELP, exitCodeForOutcome } from './exit-codes.js';
import { firstSet, parseFlags } from './flags.js';
import { handleShutdownSignals } from './signals.js';
import { logLevelFlag, WORKER_FLAGS, WORKER_FLAGS_HELP, workerOptionsFromFlags } from './worker-flags.js';

const HELP = `Usage: managed-agents-worker handle [flags]

Serve exactly one work item that something else claimed (a launcher, a webhook), read from:
  ANTHROPIC_WORK_ID, ANTHROPIC_ENVIRONMENT_ID, ANTHROPIC_SESSION_ID,
  ANTHROPIC_ENVIRONMENT_KEY, ANTHROPIC_WORK_SECRET, ANTHROPIC_BASE_URL
This is the entry point of a one-sandbox-per-session set-up: this process owns the item's lease
(heartbeats), runs the session, syncs its memory stores and stops the item at the end.
The work secret is read from ANTHROPIC_WORK_SECRET only (never a flag: flags show in ps).
SIGTERM/SIGINT: end the session gracefully (final sync, flush, stop the item) and exit 0.
The exit code says how the session ended (0 completed or skipped, 10 failed, 11 lease lost,
12 stopped by the server, 13 aborted).

Flags:
  --work-id <id>                 default: ANTHROPIC_WORK_ID
  --session-id <id>              default: ANTHROPIC_SESSION_ID
${WORKER_FLAGS_HELP}

${EXIT_CODE_HELP}`;

export const handleCommand: Command = {
  name: 'handle',
  summary: 'serve one work item from the ANTHROPIC_* variables (one sandbox per session)',
  help: HELP,
  async run(argv, io) {
    const { values } = parseFlags('handle', argv, { ...WORKER_FLAGS, 'work-id': { type: 'string' }, 'session-id': { type: 'string' } });
    if (values.help) {
      io.stdout(HELP + '\n');
      return EXIT.OK;
    }
    const logger = await cliLogger({ level: logLevelFlag(values, io.env), pretty: values.pretty ?? false, io });
    const options = workerOptionsFromFlags(values, io);
    const worker = new EnvironmentWorker({ ...options, logger });
    let signalled = false;
    const removeSignals = handleShutdownSignals(
      (signal) => {
        signalled = true;
        logger.info({ signal }, 'ending the session: final sync, flush, stop (send the signal again to exit at once)');
        void worker.close();
      },
      (code) => process.exit(code),
    );
    try {
      const secret = firstSet(io.env['ANTHROPIC_WORK_SECRET']);
      const workId = firstSet(values['work-id'], io.env['ANTHROPIC_WORK_ID']);
      const sessionId = firstSet(values['session-id'], io.env['ANTHROPIC_SESSION_ID']);
      // handleItem() rejects on a failed item (after its teardown); the exit code still comes from the outcome.
      const outcome = await worker
        .handleItem({
          ...(workId !== undefined ? { workId } : {}),
          ...(sessionId !== undefined ? { sessionId } : {}),
          ...(options.environmentId !== undefined ? { environmentId: options.environmentId } : {}),
          ...(options.environmentKey !== undefined ? { environmentKey: options.environmentKey } : {}),
          ...(secret !== undefined ? { workSecret: secret } : {}),
        })
        .catch((e: unknown): ItemOutcome => {
          if (e instanceof WorkItemFailedError) return e.outcome;
          throw e;
        });
      await worker.close();
      io.stdout(JSON.stringify({ workId: outcome.workId, sessionId: outcome.sessionId, status: outcome.status, durationMs: outcome.durationMs, error: outcome.error?.message }) + '\n');
      // A graceful stop asked for by a signal is a success: the session's changes were synced.
      if (signalled && outcome.status === 'aborted') return EXIT.OK;
      return exitCodeForOutcome(outcome.status);
    } finally {
      removeSignals();
    }
  },
};
