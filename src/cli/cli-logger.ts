import { Option, type Command as CommanderCommand, type OptionValues } from 'commander';
import pino from 'pino';
import { createLogger, type Logger } from '../internal/logger.js';
import { choiceFromEnv } from './flags.js';
import type { CommandIo } from './io.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The environment variable that sets the log level when `--log-level` is not given. */
export const LOG_LEVEL_VARIABLE = 'MAW_LOG_LEVEL';

export const LOG_ENVIRONMENT_ROW = [
  LOG_LEVEL_VARIABLE,
  `log level when --log-level is not given (${LOG_LEVELS.join(', ')}; default info)`,
] as const;

/** `--log-level` and `--pretty`, shared by every command that logs. */
export function addLogFlags(cmd: CommanderCommand): void {
  cmd
    .addOption(new Option('--log-level <level>', `log level (default: ${LOG_LEVEL_VARIABLE}, else info)`).choices(LOG_LEVELS))
    .option('--pretty', 'human-readable logs instead of JSON lines (needs: npm install pino-pretty)');
}

/** The log level from `--log-level`, else `MAW_LOG_LEVEL`, else `info`. */
export function logLevelFrom(flags: OptionValues, env: Readonly<NodeJS.ProcessEnv>): LogLevel {
  return (flags['logLevel'] as LogLevel | undefined) ?? choiceFromEnv(LOG_LEVEL_VARIABLE, env[LOG_LEVEL_VARIABLE], LOG_LEVELS) ?? 'info';
}

/**
 * The CLI's logger: JSON lines on stderr (stdout stays free for command output), with the library's
 * redaction paths; pino-pretty instead with `--pretty`. Every line on stderr comes from this logger,
 * so the stream is JSON only (or pretty only): when `--pretty` is asked for but pino-pretty is not
 * installed, the warning is itself a JSON line.
 */
export async function cliLogger(flags: OptionValues, io: Pick<CommandIo, 'env' | 'environScrub' | 'logStream'>): Promise<Logger> {
  const logger = await createCliLogger(flags, io);
  if (io.environScrub.status === 'failed') {
    logger.warn(
      { reason: io.environScrub.reason },
      'the ANTHROPIC_* credentials stay readable in /proc/<pid>/environ of this process; pass credentials with --environment-key-file / --work-secret-file instead',
    );
  }
  return logger;
}

async function createCliLogger(flags: OptionValues, io: Pick<CommandIo, 'env' | 'logStream'>): Promise<Logger> {
  const level = logLevelFrom(flags, io.env);
  const json = (): Logger => createLogger({ level }, io.logStream ?? pino.destination({ fd: 2, sync: true }));
  if (flags['pretty'] === true) {
    const pretty = await loadPinoPretty();
    if (pretty)
      return createLogger(
        { level },
        pretty({ destination: io.logStream ?? 2, sync: true, colorize: io.logStream === undefined && process.stderr.isTTY }),
      );
    const logger = json();
    logger.warn('--pretty needs pino-pretty (npm install pino-pretty); logging JSON lines instead');
    return logger;
  }
  return json();
}

type PrettyFactory = (opts: { destination: number | NodeJS.WritableStream; sync: boolean; colorize: boolean }) => pino.DestinationStream;

async function loadPinoPretty(): Promise<PrettyFactory | undefined> {
  // A variable module name keeps bundlers and the type checker from requiring the optional package.
  const name = 'pino-pretty';
  try {
    const mod = (await import(name)) as { default?: PrettyFactory } & PrettyFactory;
    return typeof mod.default === 'function' ? mod.default : mod;
  } catch {
    return undefined;
  }
}
