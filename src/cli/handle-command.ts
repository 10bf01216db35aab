import type { OptionValues } from 'commander';
import { WorkItemFailedError } from '../errors.js';
import { EnvironmentWorker, type ItemOutcome } from '../worker/environment-worker.js';
import { logError, reportError } from './cli.js';
import { cliLogger } from './cli-logger.js';
import type { Command } from './command.js';
import { addWorkSecretFlag, WORK_SECRET_VARIABLE, workSecretFrom } from './credential-flags.js';
import { COMMON_EXIT_ROWS, EXIT, exitCodeForOutcome } from './exit-codes.js';
import { firstSet, requireInputs } from './flags.js';
import type { CommandIo } from './io.js';
import { handleShutdownSignals } from './signals.js';
import { addWorkerFlags, WORKER_ENVIRONMENT, workerOptionsFromFlags } from './worker-flags.js';

export const handleCommand: Command = {
  name: 'handle',
  summary: 'serve one work item from the ANTHROPIC_* variables (one sandbox per session)',
  description: `Serve exactly one work item that something else claimed (a launcher, a webhook). This is the
entry point of a one-sandbox-per-session set-up: this process owns the item's lease (heartbeats),
runs the session, syncs its memory stores and stops the item at the end. It needs the work id,
session id and environment id, and the work secret or the environment key (both may be given in
files, so that neither shows in this process's environment). Prints the outcome as one JSON line
on stdout. SIGTERM/SIGINT: end the session gracefully (final sync, flush, stop the item), exit 0.`,
  environment: [
    ['ANTHROPIC_WORK_ID', 'work id, when --work-id is not given'],
    ['ANTHROPIC_SESSION_ID', 'session id, when --session-id is not given'],
    [WORK_SECRET_VARIABLE, "the work item's secret, when --work-secret-file is not given"],
    ...WORKER_ENVIRONMENT,
  ],
  exitCodes: [
    [EXIT.OK, 'the session completed, was skipped, or was ended by SIGTERM/SIGINT after its final sync'],
    COMMON_EXIT_ROWS.unexpected,
    COMMON_EXIT_ROWS.usage,
    [EXIT.CONFIG, 'configuration refused: missing work id, session id, environment id or credential, unreadable key file'],
    [EXIT.SESSION_FAILED, 'the session failed (mount refused, missing secret, runner error)'],
    [EXIT.LEASE_LOST, 'the lease was lost; the item now belongs to another worker'],
    [EXIT.STOPPED_BY_SERVER, 'the server asked the item to stop'],
    COMMON_EXIT_ROWS.secondSignal,
    COMMON_EXIT_ROWS.secondTerm,
  ],
  flags(cmd) {
    cmd
      .option('--work-id <id>', 'work item to serve (default: ANTHROPIC_WORK_ID)')
      .option('--session-id <id>', 'its session (default: ANTHROPIC_SESSION_ID)');
    addWorkSecretFlag(cmd);
    addWorkerFlags(cmd);
  },
  async run(flags, io) {
    // Once the command starts, every line on stderr comes from the logger; a configuration it
    // refuses before starting is reported as plain text.
    const logger = await cliLogger(flags, io);
    let item: ReturnType<typeof itemFromFlags>;
    let worker: EnvironmentWorker;
    try {
      item = itemFromFlags(flags, io);
      worker = new EnvironmentWorker({ ...item.options, logger });
    } catch (e) {
      // Refused before anything started: plain text, as a usage error is, not a log line.
      return reportError(e, io);
    }
    const { options, workSecret, workId, sessionId } = item;
    const removeSignals = handleShutdownSignals(
      (signal) => {
        logger.info({ signal }, 'ending the session: final sync, flush, stop (send the signal again to exit at once)');
        void worker.close();
      },
      (code) => process.exit(code),
    );
    try {
      // handleItem() rejects on a failed item (after its teardown); the exit code still comes from the outcome.
      const outcome = await worker
        .handleItem({
          workId,
          sessionId,
          ...(options.environmentId !== undefined ? { environmentId: options.environmentId } : {}),
          ...(options.environmentKey !== undefined ? { environmentKey: options.environmentKey } : {}),
          ...(workSecret !== undefined ? { workSecret } : {}),
        })
        .catch((e: unknown): ItemOutcome => {
          if (e instanceof WorkItemFailedError) return e.outcome;
          throw e;
        });
      await worker.close();
      io.stdout(
        JSON.stringify({
          workId: outcome.workId,
          sessionId: outcome.sessionId,
          status: outcome.status,
          durationMs: outcome.durationMs,
          error: outcome.error?.message,
        }) + '\n',
      );
      return exitCodeForOutcome(outcome.status);
    } catch (e) {
      await worker.close();
      return logError(e, logger);
    } finally {
      removeSignals();
    }
  },
};

/** The item to serve and the worker options, from flags and variables; every missing input named at once. */
function itemFromFlags(flags: OptionValues, io: CommandIo) {
  const options = workerOptionsFromFlags(flags, io);
  const workSecret = workSecretFrom(flags, io);
  const workId = firstSet(flags['workId'] as string | undefined, io.env['ANTHROPIC_WORK_ID']);
  const sessionId = firstSet(flags['sessionId'] as string | undefined, io.env['ANTHROPIC_SESSION_ID']);
  requireInputs('handle', [
    { name: 'work id', value: workId, from: '--work-id or ANTHROPIC_WORK_ID' },
    { name: 'session id', value: sessionId, from: '--session-id or ANTHROPIC_SESSION_ID' },
    { name: 'environment id', value: options.environmentId, from: '--environment-id or ANTHROPIC_ENVIRONMENT_ID' },
    {
      name: 'credential (work secret or environment key)',
      value: workSecret ?? options.environmentKey,
      from: `--work-secret-file or ${WORK_SECRET_VARIABLE}, or --environment-key-file or ANTHROPIC_ENVIRONMENT_KEY`,
    },
  ]);
  return { options, workSecret, workId: workId!, sessionId: sessionId! };
}
