import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { InvalidArgumentError, Option, type Command as CommanderCommand, type OptionValues } from 'commander';
import { MEMORY_DEFAULTS, WORKER_DEFAULTS } from '../internal/defaults.js';
import type { EnvironmentWorkerOptions } from '../worker/environment-worker.js';
import { addLogFlags, LOG_ENVIRONMENT_ROW } from './cli-logger.js';
import { addEnvironmentKeyFlags, ENVIRONMENT_KEY_VARIABLE, environmentKeyFrom } from './credential-flags.js';
import { collect, firstSet, intArg } from './flags.js';
import { CUSTOM_HEADERS_VARIABLE, customHeadersFrom, headersOption } from './custom-headers.js';
import type { CommandIo } from './io.js';

const { syncIntervalMinMs, syncIntervalMaxMs } = MEMORY_DEFAULTS;

/**
 * `--memory-sync-interval`: milliseconds (>= 5000) or `off` (sessions run without their memory
 * stores). `off` stays a string here because commander replaces a parsed `null` with `''`.
 */
export function parseMemorySyncInterval(raw: string): number | 'off' {
  if (raw === 'off') return 'off';
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isInteger(n) || n < syncIntervalMinMs || n > syncIntervalMaxMs) {
    throw new InvalidArgumentError(
      `expected milliseconds from ${syncIntervalMinMs} to ${syncIntervalMaxMs}, or "off" to run sessions without their memory stores.`,
    );
  }
  return n;
}

/**
 * `--max-concurrent-calls`: an integer of at least 1, or `unlimited` (no limit, `null`). `unlimited`
 * stays a string here because commander replaces a parsed `null` with `''`.
 */
export function parseMaxConcurrentCalls(raw: string): number | 'unlimited' {
  if (raw === 'unlimited') return 'unlimited';
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isInteger(n) || n < 1) {
    throw new InvalidArgumentError('expected an integer of at least 1, or "unlimited" for no limit.');
  }
  return n;
}

/** `--environment-id` and `--base-url`, for every command that talks to the API. */
export function addApiFlags(cmd: CommanderCommand): void {
  cmd
    .option('--environment-id <id>', 'self-hosted environment to serve (default: ANTHROPIC_ENVIRONMENT_ID)')
    .option('--base-url <url>', 'API base URL (default: ANTHROPIC_BASE_URL, else https://api.anthropic.com)');
  addEnvironmentKeyFlags(cmd);
}

/** Flags shared by the commands that run sessions (`run`, `handle`). */
export function addWorkerFlags(cmd: CommanderCommand): void {
  addApiFlags(cmd);
  cmd
    .option('--workdir <dir>', "base folder of each session's tools (default: current folder)")
    .addOption(
      new Option(
        '--memory-sync-interval <ms>',
        `memory sync interval in ms, >= ${syncIntervalMinMs} (default ${MEMORY_DEFAULTS.syncIntervalMs}); "off" runs sessions without their memory stores`,
      ).argParser(parseMemorySyncInterval),
    )
    .addOption(
      new Option(
        '--memory-sync-deletions <mode>',
        `deletions of memories whose file is gone (default ${WORKER_DEFAULTS.memorySyncDeletions})`,
      ).choices(['enabled', 'log_only', 'disabled']),
    )
    .addOption(
      new Option(
        '--memory-delete-after <ms>',
        `a file must be gone this long before its memory is deleted (default ${MEMORY_DEFAULTS.deleteAfterMs})`,
      ).argParser(intArg(0, MEMORY_DEFAULTS.deleteAfterMaxMs)),
    )
    .addOption(
      new Option(
        '--memory-buffer-bytes <bytes>',
        `memory content one mount holds at once, all its stores together (default ${MEMORY_DEFAULTS.bufferBytes})`,
      ).argParser(intArg(MEMORY_DEFAULTS.bufferMinBytes, MEMORY_DEFAULTS.bufferMaxBytes)),
    )
    .addOption(
      new Option('--max-idle <ms>', `stop a session idle this long after its turn ended (default ${WORKER_DEFAULTS.maxIdleMs})`).argParser(
        intArg(0, WORKER_DEFAULTS.maxIdleMaxMs),
      ),
    )
    .addOption(
      new Option(
        '--max-concurrent-calls <n>',
        'tool calls of one session run at once, from different session threads (default 1; "unlimited"; SDK 1.16 and later)',
      ).argParser(parseMaxConcurrentCalls),
    )
    .addOption(
      new Option(
        '--final-flush <ms>',
        `bound of the end-of-session final sync and flush (default ${MEMORY_DEFAULTS.finalFlushMs})`,
      ).argParser(intArg(MEMORY_DEFAULTS.finalFlushMinMs, MEMORY_DEFAULTS.finalFlushMaxMs)),
    )
    .option(
      '--state-dir <dir>',
      'journal, conflict and unsaved copies (default: $XDG_STATE_HOME/managed-agents-worker, else ~/.local/state/managed-agents-worker)',
    )
    .addOption(
      new Option(
        '--memory-cache-bytes <bytes>',
        `bound of the memory content cache in the state folder; 0 turns it off (default ${MEMORY_DEFAULTS.contentCacheBytes})`,
      ).argParser(intArg(0, MEMORY_DEFAULTS.contentCacheMaxBytes)),
    )
    .addOption(
      new Option('--allowed-mount-root <dir>', 'mount memory stores only inside <dir> (repeatable; default: anywhere)').argParser(collect),
    )
    .option('--worker-id <id>', 'Anthropic-Worker-ID (default: <host name>-<uuid>)')
    .addOption(
      new Option(
        '--sandbox <mode>',
        "where each session's tools run: a bubblewrap sandbox per session (auto: when it works here; bwrap: or refuse to start) or none (default auto)",
      ).choices(['auto', 'bwrap', 'none']),
    )
    .addOption(
      new Option(
        '--sandbox-network <mode>',
        'network of the sandboxes: unrestricted (public addresses through a filtering proxy; default), none or host',
      ).choices(['unrestricted', 'host', 'none']),
    )
    .addOption(new Option('--sandbox-ro <path>', 'make <path> visible read-only in every sandbox (repeatable)').argParser(collect))
    .addOption(new Option('--sandbox-rw <path>', 'make <path> visible read-write in every sandbox (repeatable)').argParser(collect))
    .addOption(
      new Option('--sandbox-env <name>', 'pass the variable <name> into every sandbox (repeatable; never ANTHROPIC_*)').argParser(collect),
    );
  addLogFlags(cmd);
}

/**
 * The `sandbox` option from the `--sandbox*` flags. The credential files given on the command line
 * are always hidden from the sandboxes, even when they sit in a folder a sandbox sees.
 */
function sandboxFromFlags(flags: OptionValues, cwd: string): EnvironmentWorkerOptions['sandbox'] {
  const mode = flags['sandbox'] as 'auto' | 'bwrap' | 'none' | undefined;
  if (mode === 'none') return 'none';
  const abs = (list: unknown): string[] => ((list as string[] | undefined) ?? []).map((p) => path.resolve(cwd, p));
  const credentialFiles = [flags['environmentKeyFile'], flags['workSecretFile']].filter(
    (f): f is string => typeof f === 'string' && f !== '/dev/stdin',
  );
  return {
    mode: mode ?? 'auto',
    readOnlyPaths: abs(flags['sandboxRo']),
    readWritePaths: abs(flags['sandboxRw']),
    hidePaths: abs(credentialFiles),
    env: (flags['sandboxEnv'] as string[] | undefined) ?? [],
    ...(flags['sandboxNetwork'] !== undefined ? { network: flags['sandboxNetwork'] as 'unrestricted' | 'host' | 'none' } : {}),
  };
}

/** Environment variables read by the commands that run sessions. */
export const WORKER_ENVIRONMENT: ReadonlyArray<readonly [string, string]> = [
  ['ANTHROPIC_ENVIRONMENT_ID', 'environment id, when --environment-id is not given'],
  [ENVIRONMENT_KEY_VARIABLE, 'environment key, when --environment-key-file is not given'],
  ['ANTHROPIC_BASE_URL', 'API base URL, when --base-url is not given'],
  [CUSTOM_HEADERS_VARIABLE, 'extra request headers, one "Name: value" per line'],
  LOG_ENVIRONMENT_ROW,
];

/**
 * The SDK client the CLI hands the worker: the base URL from the flag or ANTHROPIC_BASE_URL, no API
 * key, and the headers ANTHROPIC_CUSTOM_HEADERS listed at start (the variable itself is gone from
 * the process environment by then).
 */
export function cliClient(inputs: Pick<ApiInputs, 'baseURL' | 'defaultHeaders'>, credential: string | undefined): Anthropic {
  return new Anthropic({
    apiKey: null,
    authToken: credential ?? null,
    baseURL: inputs.baseURL ?? null,
    ...headersOption(inputs.defaultHeaders),
  });
}

export interface ApiInputs {
  environmentId: string | undefined;
  baseURL: string | undefined;
  /** From ANTHROPIC_CUSTOM_HEADERS. */
  defaultHeaders: Record<string, string> | undefined;
}

/** The environment id and base URL from their flags, else their `ANTHROPIC_*` variables; the custom headers. */
export function apiInputsFrom(flags: OptionValues, io: Pick<CommandIo, 'env'>): ApiInputs {
  return {
    environmentId: firstSet(flags['environmentId'] as string | undefined, io.env['ANTHROPIC_ENVIRONMENT_ID']),
    baseURL: firstSet(flags['baseUrl'] as string | undefined, io.env['ANTHROPIC_BASE_URL']),
    defaultHeaders: customHeadersFrom(io.env),
  };
}

/** Worker options from flags, with the `ANTHROPIC_*` variables as defaults. The credential never appears in a message. */
export function workerOptionsFromFlags(flags: OptionValues, io: Pick<CommandIo, 'env' | 'cwd'>): Omit<EnvironmentWorkerOptions, 'logger'> {
  const environmentKey = environmentKeyFrom(flags, io);
  const inputs = apiInputsFrom(flags, io);
  const { environmentId } = inputs;
  const opts: Omit<EnvironmentWorkerOptions, 'logger'> = {
    client: cliClient(inputs, environmentKey),
    workdir: (flags['workdir'] as string | undefined) ?? io.cwd,
  };
  if (environmentId !== undefined) opts.environmentId = environmentId;
  if (environmentKey !== undefined) opts.environmentKey = environmentKey;
  const interval = flags['memorySyncInterval'] as number | 'off' | undefined;
  if (interval !== undefined) opts.memorySyncIntervalMs = interval === 'off' ? null : interval;
  if (flags['memorySyncDeletions'] !== undefined)
    opts.memorySyncDeletions = flags['memorySyncDeletions'] as 'enabled' | 'log_only' | 'disabled';
  if (flags['memoryDeleteAfter'] !== undefined) opts.memoryDeleteAfterMs = flags['memoryDeleteAfter'] as number;
  if (flags['memoryBufferBytes'] !== undefined) opts.memoryBufferBytes = flags['memoryBufferBytes'] as number;
  if (flags['maxIdle'] !== undefined) opts.maxIdleMs = flags['maxIdle'] as number;
  const calls = flags['maxConcurrentCalls'] as number | 'unlimited' | undefined;
  if (calls !== undefined) opts.maxConcurrentCalls = calls === 'unlimited' ? null : calls;
  if (flags['finalFlush'] !== undefined) opts.finalFlushMs = flags['finalFlush'] as number;
  if (flags['stateDir'] !== undefined) opts.stateDir = flags['stateDir'] as string;
  if (flags['memoryCacheBytes'] !== undefined) opts.memoryCacheBytes = flags['memoryCacheBytes'] as number;
  const roots = flags['allowedMountRoot'] as string[] | undefined;
  if (roots !== undefined) opts.allowedMountRoots = roots.map((r) => path.resolve(io.cwd, r));
  if (flags['workerId'] !== undefined) opts.workerId = flags['workerId'] as string;
  opts.sandbox = sandboxFromFlags(flags, io.cwd);
  return opts;
}
