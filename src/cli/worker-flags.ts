import Anthropic from '@anthropic-ai/sdk';
import { ConfigError } from '../errors.js';
import { FINAL_FLUSH_MAX_MS, FINAL_FLUSH_MIN_MS, MEMORY_SYNC_INTERVAL_MIN_MS } from '../memory/options.js';
import type { EnvironmentWorkerOptions } from '../worker/environment-worker.js';
import { LOG_LEVELS, type LogLevel } from './cli-logger.js';
import { choiceFlag, firstSet, intFlag } from './flags.js';
import type { CliIo } from './io.js';

/** Flags shared by the commands that run sessions (`run`, `handle`). */
export const WORKER_FLAGS = {
  'environment-id': { type: 'string' },
  'environment-key': { type: 'string' },
  'base-url': { type: 'string' },
  workdir: { type: 'string' },
  'memory-sync-interval': { type: 'string' },
  'memory-sync-deletions': { type: 'string' },
  'max-idle': { type: 'string' },
  'final-flush': { type: 'string' },
  'state-dir': { type: 'string' },
  'worker-id': { type: 'string' },
  'log-level': { type: 'string' },
  pretty: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const WORKER_FLAGS_HELP = `  --environment-id <id>          default: ANTHROPIC_ENVIRONMENT_ID
  --environment-key <key>        default: ANTHROPIC_ENVIRONMENT_KEY (prefer the variable: flags show in ps)
  --base-url <url>               default: ANTHROPIC_BASE_URL, else https://api.anthropic.com
  --workdir <dir>                base folder of each session's tools (default: current folder)
  --memory-sync-interval <ms>    memory sync interval, >= 5000 (default 15000); "off" disables memory
  --memory-sync-deletions <mode> enabled (default) | log_only | disabled
  --max-idle <ms>                stop a session idle this long after its turn ended (default 60000)
  --final-flush <ms>             bound of the end-of-session final sync + flush (default 30000)
  --state-dir <dir>              where the memory core keeps its state and conflict copies
  --worker-id <id>               Anthropic-Worker-ID (default: <HOSTNAME>-<uuid>)
  --log-level <level>            ${LOG_LEVELS.join(' | ')} (default info)
  --pretty                       human-readable logs (needs: npm install pino-pretty)
  -h, --help                     show this help`;

export interface WorkerFlagValues {
  'environment-id'?: string | undefined;
  'environment-key'?: string | undefined;
  'base-url'?: string | undefined;
  workdir?: string | undefined;
  'memory-sync-interval'?: string | undefined;
  'memory-sync-deletions'?: string | undefined;
  'max-idle'?: string | undefined;
  'final-flush'?: string | undefined;
  'state-dir'?: string | undefined;
  'worker-id'?: string | undefined;
  'log-level'?: string | undefined;
  pretty?: boolean | undefined;
}

export function logLevelFlag(values: { 'log-level'?: string | undefined }, env: NodeJS.ProcessEnv): LogLevel {
  return choiceFlag('log-level', firstSet(values['log-level'], env['MAW_LOG_LEVEL']), LOG_LEVELS) ?? 'info';
}

/** `--memory-sync-interval`: milliseconds (>= 5000) or `off` (memory disabled). */
export function memorySyncIntervalFlag(raw: string | undefined): number | null | undefined {
  if (raw === undefined) return undefined;
  if (raw === 'off' || raw === 'null') return null;
  const n = intFlag('memory-sync-interval', raw, MEMORY_SYNC_INTERVAL_MIN_MS, 86_400_000);
  return n;
}

/** The SDK client the CLI hands the worker: the base URL from the flag or ANTHROPIC_BASE_URL, no API key. */
export function cliClient(baseURL: string | undefined, credential: string | undefined): Anthropic {
  return new Anthropic({ apiKey: null, authToken: credential ?? null, baseURL: baseURL ?? null });
}

/** Worker options from flags, with the `ANTHROPIC_*` variables as defaults. The credential never appears in a message. */
export function workerOptionsFromFlags(values: WorkerFlagValues, io: CliIo): Omit<EnvironmentWorkerOptions, 'logger'> {
  const environmentKey = firstSet(values['environment-key'], io.env['ANTHROPIC_ENVIRONMENT_KEY']);
  const deletions = choiceFlag('memory-sync-deletions', values['memory-sync-deletions'], ['enabled', 'log_only', 'disabled'] as const);
  const interval = memorySyncIntervalFlag(values['memory-sync-interval']);
  const maxIdleMs = intFlag('max-idle', values['max-idle'], 0, 86_400_000);
  const finalFlushMs = intFlag('final-flush', values['final-flush'], FINAL_FLUSH_MIN_MS, FINAL_FLUSH_MAX_MS);
  const opts: Omit<EnvironmentWorkerOptions, 'logger'> = {
    client: cliClient(firstSet(values['base-url'], io.env['ANTHROPIC_BASE_URL']), environmentKey),
    workdir: values.workdir ?? io.cwd,
  };
  const environmentId = firstSet(values['environment-id'], io.env['ANTHROPIC_ENVIRONMENT_ID']);
  if (environmentId !== undefined) opts.environmentId = environmentId;
  if (environmentKey !== undefined) opts.environmentKey = environmentKey;
  if (interval !== undefined) opts.memorySyncIntervalMs = interval;
  if (deletions !== undefined) opts.memorySyncDeletions = deletions;
  if (maxIdleMs !== undefined) opts.maxIdleMs = maxIdleMs;
  if (finalFlushMs !== undefined) opts.finalFlushMs = finalFlushMs;
  if (values['state-dir'] !== undefined) opts.stateDir = values['state-dir'];
  if (values['worker-id'] !== undefined) opts.workerId = values['worker-id'];
  return opts;
}

/** A value the command cannot run without: missing, it is refused as configuration (exit 3), naming the flag and the variable. */
export function requireValue(name: string, value: string | undefined, envVar: string): string {
  if (value === undefined) throw new ConfigError(`${name} is required: set ${envVar} (or pass --${name})`);
  return value;
}
