import { RemoteApiError } from '../errors.js';
import { Launcher } from '../launcher/launcher.js';
import type { Command } from './command.js';
import { cliLogger, LOG_LEVELS } from './cli-logger.js';
import { EXIT, EXIT_CODE_HELP } from './exit-codes.js';
import { firstSet, intFlag, parseFlags } from './flags.js';
import { handleShutdownSignals } from './signals.js';
import { UsageError } from './usage-error.js';
import { cliClient, logLevelFlag, requireValue } from './worker-flags.js';

const HELP = `Usage: managed-agents-worker launch --on-work <command> [flags]

One sandbox per session: claims work items and runs <command> (with /bin/sh -c) once per item,
with the item in ANTHROPIC_WORK_ID, ANTHROPIC_ENVIRONMENT_ID, ANTHROPIC_SESSION_ID,
ANTHROPIC_BASE_URL, ANTHROPIC_WORK_SECRET, and ANTHROPIC_ENVIRONMENT_KEY only for an item without
a usable secret. Of this process's environment, <command> gets only PATH, HOME, USER, LOGNAME,
SHELL, TMPDIR, TZ, LANG, LANGUAGE, LC_ALL, LC_CTYPE, LC_MESSAGES, TERM, MAW_LOG_LEVEL and the
variables named with --pass-env. Inside the sandbox, run "managed-agents-worker handle": it owns
the item (heartbeats, session, memory, stop).

Contract: the launcher never stops a session's item (one that is not a session, such as a
healthcheck, is stopped at once); the item is finished when the sandbox exits. <command>
should return when the sandbox has exited (docker run without -d; kubectl create job + kubectl
wait), so --concurrency bounds running sandboxes. A command that returns at once is safe (its
session keeps running in its sandbox), but then it no longer counts against --concurrency.
SIGTERM/SIGINT: stop claiming, forward SIGTERM to every sandbox command, wait for them, exit 0.

Flags:
  --on-work <command>        the sandbox command (required)
  --concurrency <n>          sandboxes at once, 1..256 (default 1)
  --kill-after <ms>          after a shutdown signal, SIGKILL sandboxes still running (default 60000)
  --pass-env <name>          also pass this variable to <command> (repeatable), e.g. DOCKER_HOST
  --environment-id <id>      default: ANTHROPIC_ENVIRONMENT_ID
  --environment-key <key>    default: ANTHROPIC_ENVIRONMENT_KEY
  --base-url <url>           default: ANTHROPIC_BASE_URL (also passed to the sandboxes)
  --worker-id <id>           Anthropic-Worker-ID on polls
  --log-level <level>        ${LOG_LEVELS.join(' | ')} (default info)
  --pretty                   human-readable logs (needs pino-pretty)
  -h, --help                 show this help

${EXIT_CODE_HELP}`;

export const launchCommand: Command = {
  name: 'launch',
  summary: 'claim work and start one sandbox command per item (--on-work <command>)',
  help: HELP,
  async run(argv, io) {
    const { values } = parseFlags('launch', argv, {
      'on-work': { type: 'string' },
      concurrency: { type: 'string' },
      'kill-after': { type: 'string' },
      'pass-env': { type: 'string', multiple: true },
      'environment-id': { type: 'string' },
      'environment-key': { type: 'string' },
      'base-url': { type: 'string' },
      'worker-id': { type: 'string' },
      'log-level': { type: 'string' },
      pretty: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    });
    if (values.help) {
      io.stdout(HELP + '\n');
      return EXIT.OK;
    }
    const command = values['on-work'];
    if (!command) throw new UsageError('launch: --on-work <command> is required');
    const environmentId = requireValue('environment-id', firstSet(values['environment-id'], io.env['ANTHROPIC_ENVIRONMENT_ID']), 'ANTHROPIC_ENVIRONMENT_ID');
    const environmentKey = requireValue('environment-key', firstSet(values['environment-key'], io.env['ANTHROPIC_ENVIRONMENT_KEY']), 'ANTHROPIC_ENVIRONMENT_KEY');
    const logger = await cliLogger({ level: logLevelFlag(values, io.env), pretty: values.pretty ?? false, io });
    const concurrency = intFlag('concurrency', values.concurrency, 1, 256);
    const killAfterMs = intFlag('kill-after', values['kill-after'], 0, 3_600_000);
    const launcher = new Launcher({
      client: cliClient(firstSet(values['base-url'], io.env['ANTHROPIC_BASE_URL']), environmentKey),
      environmentId,
      environmentKey,
      command,
      env: io.env,
      logger,
      ...(values['pass-env'] ? { passEnv: values['pass-env'] } : {}),
      ...(concurrency !== undefined ? { concurrency } : {}),
      ...(killAfterMs !== undefined ? { killAfterMs } : {}),
      ...(values['worker-id'] ? { workerId: values['worker-id'] } : {}),
    });
    const removeSignals = handleShutdownSignals(
      (signal) => {
        logger.info({ signal, sandboxes: launcher.running }, 'shutting down: no new work; waiting for running sandboxes (send the signal again to exit at once)');
        void launcher.close();
      },
      (code) => process.exit(code),
    );
    try {
      await launcher.run();
      await launcher.close();
      return EXIT.OK;
    } catch (e) {
      if (e instanceof RemoteApiError && !e.retryable) {
        logger.fatal({ err: e, status: e.status }, 'the API refused the launcher for good; check the environment id and key');
        await launcher.close();
        return EXIT.FATAL_API;
      }
      throw e;
    } finally {
      removeSignals();
    }
  },
};
