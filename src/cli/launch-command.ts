import { Option } from 'commander';
import { LAUNCHER_DEFAULTS } from '../internal/defaults.js';
import { Launcher } from '../launcher/launcher.js';
import { SANDBOX_BASE_ENV_VARS } from '../launcher/sandbox-env.js';
import { logError, logRefusedForGood, reportError } from './cli.js';
import { addLogFlags, cliLogger, LOG_ENVIRONMENT_ROW } from './cli-logger.js';
import type { Command } from './command.js';
import { environmentKeyFrom } from './credential-flags.js';
import { COMMON_EXIT_ROWS, EXIT } from './exit-codes.js';
import { collect, environmentInputs, intArg, requireInputs } from './flags.js';
import { handleShutdownSignals } from './signals.js';
import { addApiFlags, apiInputsFrom, cliClient } from './worker-flags.js';

export const launchCommand: Command = {
  name: 'launch',
  summary: 'claim work and start one sandbox command per item (--on-work <command>)',
  description: `One sandbox per session: claims work items and runs <command> (with /bin/sh -c) once per item,
with the item in ANTHROPIC_WORK_ID, ANTHROPIC_ENVIRONMENT_ID, ANTHROPIC_SESSION_ID,
ANTHROPIC_BASE_URL, ANTHROPIC_WORK_SECRET, and ANTHROPIC_ENVIRONMENT_KEY only for an item without
a usable secret. Of this process's environment, <command> gets only ${SANDBOX_BASE_ENV_VARS.join(', ')}
and the variables named with --pass-env. Inside the sandbox, run "managed-agents-worker handle": it
owns the item (heartbeats, session, memory, stop).

Contract: the launcher never stops a session's item (one that is not a session, such as a
healthcheck, is stopped at once); the item is finished when the sandbox exits. <command>
should return when the sandbox has exited (docker run without -d; kubectl create job + kubectl
wait), so --concurrency bounds running sandboxes. A command that returns at once is safe (its
session keeps running in its sandbox), but then it no longer counts against --concurrency.
SIGTERM/SIGINT: stop claiming, forward SIGTERM to every sandbox command, wait for them, exit 0.`,
  environment: [
    ['ANTHROPIC_ENVIRONMENT_ID', 'environment id, when --environment-id is not given'],
    ['ANTHROPIC_ENVIRONMENT_KEY', 'environment key, when --environment-key-file is not given'],
    ['ANTHROPIC_BASE_URL', 'API base URL, when --base-url is not given (also passed to the sandboxes)'],
    LOG_ENVIRONMENT_ROW,
  ],
  exitCodes: [
    [EXIT.OK, 'stopped by SIGTERM/SIGINT after every sandbox exited'],
    COMMON_EXIT_ROWS.unexpected,
    [EXIT.USAGE, 'usage error: unknown flag, bad flag value, no --on-work'],
    COMMON_EXIT_ROWS.config,
    COMMON_EXIT_ROWS.fatalApi,
    COMMON_EXIT_ROWS.secondSignal,
    COMMON_EXIT_ROWS.secondTerm,
  ],
  flags(cmd) {
    cmd
      .requiredOption('--on-work <command>', 'the sandbox command, run with /bin/sh -c once per item (required)')
      .addOption(
        new Option(
          '--concurrency <n>',
          `sandboxes at once, 1..${LAUNCHER_DEFAULTS.concurrencyMax} (default ${LAUNCHER_DEFAULTS.concurrency})`,
        ).argParser(intArg(1, LAUNCHER_DEFAULTS.concurrencyMax)),
      )
      .addOption(
        new Option(
          '--kill-after <ms>',
          `after a shutdown signal, SIGKILL sandboxes still running (default ${LAUNCHER_DEFAULTS.killAfterMs})`,
        ).argParser(intArg(0, LAUNCHER_DEFAULTS.killAfterMaxMs)),
      )
      .addOption(new Option('--pass-env <name>', 'also pass this variable to <command> (repeatable), e.g. DOCKER_HOST').argParser(collect))
      .option('--worker-id <id>', 'Anthropic-Worker-ID on polls');
    addApiFlags(cmd);
    addLogFlags(cmd);
  },
  async run(flags, io) {
    // Once the command starts, every line on stderr comes from the logger; a configuration it
    // refuses before starting is reported as plain text.
    const logger = await cliLogger(flags, io);
    const concurrency = flags['concurrency'] as number | undefined;
    const killAfterMs = flags['killAfter'] as number | undefined;
    const workerId = flags['workerId'] as string | undefined;
    const passEnv = flags['passEnv'] as string[] | undefined;
    let launcher: Launcher;
    try {
      const inputs = apiInputsFrom(flags, io);
      const { environmentId } = inputs;
      const environmentKey = environmentKeyFrom(flags, io);
      requireInputs('launch', environmentInputs(environmentId, environmentKey));
      launcher = new Launcher({
        client: cliClient(inputs, environmentKey),
        environmentId: environmentId!,
        environmentKey: environmentKey!,
        command: flags['onWork'] as string,
        // The launcher passes only the allow-listed variables and those named with --pass-env.
        env: io.env,
        logger,
        ...(passEnv ? { passEnv } : {}),
        ...(concurrency !== undefined ? { concurrency } : {}),
        ...(killAfterMs !== undefined ? { killAfterMs } : {}),
        ...(workerId ? { workerId } : {}),
      });
    } catch (e) {
      // Refused before anything started: plain text, as a usage error is, not a log line.
      return reportError(e, io);
    }
    const removeSignals = handleShutdownSignals(
      (signal) => {
        logger.info(
          { signal, sandboxes: launcher.running },
          'shutting down: no new work; waiting for running sandboxes (send the signal again to exit at once)',
        );
        void launcher.close();
      },
      (code) => process.exit(code),
    );
    try {
      await launcher.run();
      await launcher.close();
      return EXIT.OK;
    } catch (e) {
      await launcher.close();
      return logRefusedForGood(e, logger, 'the launcher') ?? logError(e, logger);
    } finally {
      removeSignals();
    }
  },
};
