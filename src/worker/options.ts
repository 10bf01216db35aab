import path from 'node:path';
import { z } from 'zod/v3';
import type Anthropic from '@anthropic-ai/sdk';
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import type { BetaToolRunnerRequestOptions } from '@anthropic-ai/sdk/lib/tools/BetaToolRunner';
import type { AgentToolContext } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import { ConfigError, PlatformError } from '../errors.js';
import {
  describeValue as describeReceived,
  isObject,
  looksLikeClient,
  looksLikeLogger,
  missingVariableHint,
} from '../internal/option-schema.js';
import { isTimerClock, monotonicClock, type TimerClock } from '../internal/clock.js';
import { WORKER_DEFAULTS } from '../internal/defaults.js';
import type { Logger } from '../internal/logger.js';
import type { MemoryDeleteMode } from '../memory/rules/types.js';
import { defaultStateDir } from '../memory/index.js';
import { assertStateDirOutsideWorkdir } from './state-dir-outside.js';
import { assertHiddenPathsSafe } from './hidden-paths-guard.js';
import {
  resolveSandboxOption,
  SANDBOX_OPTION_EXPECTED,
  sandboxOptionSchema,
  type ResolvedSandboxOptions,
  type SandboxOption,
} from '../sandbox/options.js';

import {
  FINAL_FLUSH_DEFAULT_MS,
  MEMORY_BUFFER_DEFAULT_BYTES,
  MEMORY_DELETE_AFTER_DEFAULT_MS,
  MEMORY_CONTENT_CACHE_DEFAULT_BYTES,
  MEMORY_OPTION_EXPECTED,
  MEMORY_SYNC_INTERVAL_DEFAULT_MS,
  MEMORY_SYNC_INTERVAL_MIN_MS,
  memoryOptionFields,
} from '../memory/sync/options.js';

export { FINAL_FLUSH_DEFAULT_MS, MEMORY_SYNC_INTERVAL_DEFAULT_MS, MEMORY_SYNC_INTERVAL_MIN_MS };
/** Default time a session waits for a mount path held by another session of this process. */
export const PATH_WAIT_DEFAULT_MS = WORKER_DEFAULTS.pathWaitMs;
/** Default bound on a session's whole mount (listing and downloading every store). */
export const MOUNT_TIMEOUT_DEFAULT_MS = WORKER_DEFAULTS.mountTimeoutMs;
/** Most sessions one worker serves at once. */
export const CONCURRENCY_MAX = WORKER_DEFAULTS.concurrencyMax;
const { mountTimeoutMinMs, mountTimeoutMaxMs } = WORKER_DEFAULTS;

/** Either a fixed tool list, or a factory called once per session with that session's tool context. */
export type EnvironmentWorkerTools = BetaRunnableTool[] | ((ctx: AgentToolContext) => BetaRunnableTool[]);

/**
 * Options of {@link EnvironmentWorker}. The official SDK worker's option names keep their meaning,
 * so switching is one import line; the options marked "ours" are additions.
 */
export interface EnvironmentWorkerOptions {
  /** The SDK client. Its base URL, timeouts and retries are inherited by every scoped copy the worker makes. */
  client: Anthropic;
  /**
   * The self-hosted environment to poll. Default: none; `run()` then throws a {@link ConfigError},
   * and `handleItem()` falls back to `ANTHROPIC_ENVIRONMENT_ID`.
   */
  environmentId?: string;
  /**
   * The environment key: polling always uses it; per-item calls use it only when the item carries no
   * sessions token. Default: none; `run()` then throws a {@link ConfigError}, and `handleItem()` falls
   * back to `ANTHROPIC_ENVIRONMENT_KEY` when it needs one.
   */
  environmentKey?: string;
  /**
   * Base directory of each session's tool context. Default: `process.cwd()`. Stores attached without
   * a `mount_path` are mounted at `<workdir>/memory/<name>`. With `concurrency` > 1, sessions running
   * at once must not share files (nor the `skills/<name>` folders the SDK's `setupSkills` writes and
   * removes), so each session's tools get `<workdir>/sessions/<session id>` as their workdir instead:
   * created when the session starts, kept at its end while it holds files (a later work item of the
   * same session finds them; clean old ones up yourself), removed when empty.
   */
  workdir?: string;
  /**
   * Tools per session. Default: the SDK's `agent_toolset_20260401` bound to the session's context,
   * run in the session's sandbox (see `sandbox`). Tools given here run in the worker process itself,
   * outside any sandbox.
   */
  tools?: EnvironmentWorkerTools;
  /**
   * Ours: where each session's agent toolset runs. `'auto'` (default): in a bubblewrap sandbox of its
   * own on Linux; where none can start, a worker serving sessions from a queue (`run()`,
   * `readyToServe()`, the webhook handler, `handleItem()` at `concurrency` above 1) refuses to start
   * with a `SandboxUnavailableError` naming the cause and the fix, and one serving a single session
   * per process runs it in the worker process after a warning (off Linux: in the worker process
   * after a warning); `'bwrap'`: the sandbox or the worker refuses to start; `'none'`: in the worker
   * process, chosen. An object sets the mode and what the sandbox may see beyond the session's own folders
   * (see docs/security.md, "Isolation: one sandbox per session").
   */
  sandbox?: SandboxOption;
  /** Size cap (bytes) for whole-file reads and edits by the file tools; `null` disables it. Default: the toolset's. */
  maxFileBytes?: number | null;
  /** Milliseconds a session may stay idle after its turn ended before the runner stops. Default: the SDK runner's 60 000. */
  maxIdleMs?: number;
  /**
   * How many tool calls of one session may run at once, passed to the SDK's session runner: calls of
   * different session threads run concurrently, those of one thread always one at a time. An integer
   * of at least 1; `null`: no limit. Default 1. Read by the runner of SDK 1.16 and later; the runner
   * of SDK 1.14 and 1.15 ignores it and runs one call at a time.
   */
  maxConcurrentCalls?: number | null;
  /** Milliseconds between memory syncs (at most one per interval). Default 15 000, minimum 5 000; `null` turns memory off. */
  memorySyncIntervalMs?: number | null;
  /** What a local deletion does on the server: `enabled` (default), `log_only`, `disabled`. */
  memorySyncDeletions?: MemoryDeleteMode;
  /** Sent as `Anthropic-Worker-ID` on every poll. Default: `<host name>-<uuid>` (`os.hostname()`). */
  workerId?: string;
  /** Aborting it does what `close()` does. Default: none. */
  signal?: AbortSignal;
  /**
   * Extra request options (e.g. proxy headers) merged into the work poll/ack/heartbeat/stop calls, the
   * session fetch and the tool runner's stream/list/send calls, as the official worker does; the memory
   * and skill calls go without them. A `signal` in it is ignored. Default: none.
   */
  requestOptions?: BetaToolRunnerRequestOptions;
  /**
   * Ours: sessions `run()` serves at once, 1..64. Default 1 (as the official worker). `handleItem()` is
   * not limited by it, but the per-session workdir (see `workdir`) follows it: a webhook handler
   * serving N items at once needs a worker with `concurrency: N` (a warning is logged otherwise).
   */
  concurrency?: number;
  /** Ours: a pino logger. Default: `warn` and above to stderr, with credentials redacted. */
  logger?: Logger;
  /** Ours: milliseconds the end-of-session final sync plus flush may take in total, 1..600 000. Default 30 000. */
  finalFlushMs?: number;
  /**
   * Ours: milliseconds a file must have been gone (and a later sync must confirm it) before its
   * memory is deleted in the store. Default 30 000, as the official worker. The final sync waives it.
   */
  memoryDeleteAfterMs?: number;
  /** Ours: where the memory core keeps sync state and conflict copies. Default: the memory core's own. */
  stateDir?: string;
  /**
   * Ours: bytes of memory content one mount holds in memory at once, all its stores together: half
   * for listing pages in flight, half for downloaded files waiting to be written. A page's contents
   * are let go as soon as they are written, so the worker's memory follows this bound, not the
   * stores' size. 1 MiB..1 GiB; default 4 MiB (4 194 304).
   */
  memoryBufferBytes?: number;
  /**
   * Ours: bytes of memory contents kept in the state folder's content cache, so the next mount of an
   * unchanged store copies them instead of downloading them (least recently used removed past it).
   * Default 536 870 912 (512 MiB); `0` turns the cache off.
   */
  memoryCacheBytes?: number;
  /** Ours: milliseconds a session waits for a mount path another running session holds, then fails. Default 60 000. */
  pathWaitMs?: number;
  /**
   * Ours: folders memory stores may be mounted in. A store whose mount path is not strictly inside
   * one of them is refused (the work item fails with a message naming the path). Default: no
   * restriction (`undefined` or an empty list).
   */
  allowedMountRoots?: string[];
  /**
   * Ours: milliseconds a session's whole mount (listing and downloading every store) may take; past it
   * the folders are removed and the work item fails cleanly. Default 300 000.
   */
  mountTimeoutMs?: number;
  /**
   * Time source of the worker's waits and bounds: poll backoff and cut-offs, heartbeat interval and
   * cut-off, lease deadline, item timings. Default: the process's monotonic clock.
   * @internal for tests, which drive it by hand; not a supported option.
   */
  clock?: TimerClock;
  /**
   * Removed official option. Passing it throws a {@link ConfigError} explaining the migration.
   * @deprecated
   */
  unrestrictedPaths?: never;
}

/** The options after validation and defaults. */
export interface ResolvedWorkerOptions {
  client: Anthropic;
  environmentId: string | undefined;
  environmentKey: string | undefined;
  workdir: string;
  tools: EnvironmentWorkerTools | undefined;
  sandbox: ResolvedSandboxOptions;
  maxFileBytes: number | null | undefined;
  maxIdleMs: number | undefined;
  /** At least 1, or null for no limit. */
  maxConcurrentCalls: number | null;
  memorySyncIntervalMs: number | null;
  memorySyncDeletions: MemoryDeleteMode;
  workerId: string | undefined;
  signal: AbortSignal | undefined;
  requestOptions: BetaToolRunnerRequestOptions | undefined;
  concurrency: number;
  logger: Logger | undefined;
  finalFlushMs: number;
  memoryDeleteAfterMs: number;
  stateDir: string | undefined;
  memoryBufferBytes: number;
  memoryCacheBytes: number;
  pathWaitMs: number;
  allowedMountRoots: string[];
  mountTimeoutMs: number;
  clock: TimerClock;
}

const isFunction = (v: unknown): boolean => typeof v === 'function';

function looksLikeSignal(v: unknown): boolean {
  return isObject(v) && typeof v['aborted'] === 'boolean' && isFunction(v['addEventListener']);
}

const nonEmpty = z.string().min(1);

const schema = z
  .object({
    client: z.custom<Anthropic>(looksLikeClient),
    environmentId: nonEmpty.optional(),
    environmentKey: nonEmpty.optional(),
    workdir: nonEmpty.optional(),
    tools: z.custom<EnvironmentWorkerTools>((v) => Array.isArray(v) || isFunction(v)).optional(),
    sandbox: sandboxOptionSchema.optional(),
    maxFileBytes: z.number().int().positive().nullable().optional(),
    maxIdleMs: z.number().int().optional(),
    maxConcurrentCalls: z.number().int().min(1).nullable().optional(),
    ...memoryOptionFields,
    workerId: nonEmpty.optional(),
    signal: z.custom<AbortSignal>(looksLikeSignal).optional(),
    requestOptions: z.custom<BetaToolRunnerRequestOptions>(isObject).optional(),
    concurrency: z.number().int().min(1).max(CONCURRENCY_MAX).optional(),
    logger: z.custom<Logger>(looksLikeLogger).optional(),
    pathWaitMs: z.number().int().min(0).optional(),
    allowedMountRoots: z.array(z.string().startsWith('/')).optional(),
    mountTimeoutMs: z.number().int().min(mountTimeoutMinMs).max(mountTimeoutMaxMs).optional(),
    clock: z.custom<TimerClock>(isTimerClock).optional(),
  })
  .strict();

/** What each option accepts, as the error message says it. */
const EXPECTED: Record<string, string> = {
  client: 'an Anthropic client (new Anthropic({ ... }))',
  environmentId: 'a non-empty string (env_...)',
  environmentKey: 'a non-empty string',
  workdir: 'a non-empty directory path',
  tools: 'an array of runnable tools or a function (ctx) => tools',
  sandbox: SANDBOX_OPTION_EXPECTED,
  maxFileBytes: 'a positive integer or null',
  maxIdleMs: 'an integer number of milliseconds',
  maxConcurrentCalls: 'an integer of at least 1, or null for no limit',
  ...MEMORY_OPTION_EXPECTED,
  workerId: 'a non-empty string',
  signal: 'an AbortSignal',
  requestOptions: 'an object of request options',
  concurrency: `an integer from 1 to ${CONCURRENCY_MAX}`,
  logger: 'a pino logger',
  pathWaitMs: 'an integer number of milliseconds >= 0',
  allowedMountRoots: 'an array of absolute folder paths',
  mountTimeoutMs: `an integer number of milliseconds from ${mountTimeoutMinMs} to ${mountTimeoutMaxMs}`,
};

/** What the test-only options accept; they are left out of the list of accepted options. */
const INTERNAL_EXPECTED: Record<string, string> = {
  clock: 'a clock { now(), schedule(ms, callback) }',
};

/** The variables apps read these options from, named when one is missing. */
const VARIABLES: Record<string, string> = { environmentId: 'ANTHROPIC_ENVIRONMENT_ID', environmentKey: 'ANTHROPIC_ENVIRONMENT_KEY' };

/** Options whose value must never appear in a message, even when it is wrong. */
const SECRET_OPTIONS = new Set(['environmentKey']);

/** A short, safe rendering of a received value (a secret option shows only its type). */
function describeValue(key: string, v: unknown): string {
  return describeReceived(v, SECRET_OPTIONS.has(key));
}

const UNRESTRICTED_PATHS_MIGRATION =
  'unrestrictedPaths: this official option was removed; the file tools are always confined to `workdir` ' +
  "plus the session's memory folders. Remove it; to open another directory to the file tools, return tools " +
  'built with `allowedRoots` from a `tools: (ctx) => ...` factory.';

/** Refuse to run on Windows: memory folders need POSIX semantics and O_NOFOLLOW. */
export function assertPosixPlatform(platform: string = process.platform): void {
  if (platform === 'win32') throw new PlatformError(platform);
}

/**
 * Validate the constructor options and fill in defaults. Throws {@link ConfigError} with one line per
 * problem (`option: expected …, got …`); never echoes a credential.
 */
export function resolveWorkerOptions(input: unknown): ResolvedWorkerOptions {
  if (!isObject(input)) {
    throw new ConfigError('EnvironmentWorker options must be an object with at least `client`', [
      `options: expected an object, got ${describeValue('options', input)}`,
    ]);
  }
  const issues: string[] = [];
  if ('unrestrictedPaths' in input && input['unrestrictedPaths'] !== undefined) issues.push(UNRESTRICTED_PATHS_MIGRATION);
  const { unrestrictedPaths: _ignored, ...rest } = input;
  const parsed = schema.safeParse(rest);
  if (!parsed.success) {
    const seen = new Set<string>();
    for (const issue of parsed.error.issues) {
      // An unknown key inside an option's own object (`sandbox: { … }`) is a bad value of that option.
      if (issue.code === 'unrecognized_keys' && issue.path.length === 0) {
        for (const key of issue.keys) {
          issues.push(`${key}: unknown option; accepted options are ${Object.keys(EXPECTED).join(', ')}`);
        }
        continue;
      }
      const key = String(issue.path[0] ?? 'options');
      if (seen.has(key)) continue;
      seen.add(key);
      issues.push(
        `${key}: expected ${EXPECTED[key] ?? INTERNAL_EXPECTED[key] ?? issue.message}, got ${describeValue(key, rest[key])}${missingVariableHint(rest[key], VARIABLES[key])}`,
      );
    }
  }
  // Passed, but undefined: the app meant to give it (usually from an unset variable). Refused here,
  // before the app binds a port or calls run(); leave the option out for a handleItem-only worker.
  for (const key of Object.keys(VARIABLES)) {
    if (key in rest && rest[key] === undefined)
      issues.push(
        `${key}: expected a non-empty string, got undefined (is ${VARIABLES[key]} set?); leave it out only for a worker used through handleItem()`,
      );
  }
  if (issues.length > 0 || !parsed.success) {
    throw new ConfigError(`invalid EnvironmentWorker options:\n  ${issues.join('\n  ')}`, issues);
  }
  const o = parsed.data;
  const workdir = path.resolve(o.workdir ?? process.cwd());
  const sandbox = resolveSandboxOption(o.sandbox);
  assertStateDirOutsideWorkdir(o.stateDir ?? defaultStateDir(), workdir, sandbox.readWritePaths);
  if (sandbox.mode !== 'none') assertHiddenPathsSafe(sandbox.hidePaths, [workdir, ...sandbox.readWritePaths]);
  return {
    client: o.client,
    environmentId: o.environmentId,
    environmentKey: o.environmentKey,
    workdir,
    tools: o.tools,
    sandbox,
    maxFileBytes: o.maxFileBytes,
    maxIdleMs: o.maxIdleMs,
    maxConcurrentCalls: o.maxConcurrentCalls === undefined ? 1 : o.maxConcurrentCalls,
    memorySyncIntervalMs: o.memorySyncIntervalMs === undefined ? MEMORY_SYNC_INTERVAL_DEFAULT_MS : o.memorySyncIntervalMs,
    memorySyncDeletions: o.memorySyncDeletions ?? WORKER_DEFAULTS.memorySyncDeletions,
    workerId: o.workerId,
    signal: o.signal,
    requestOptions: o.requestOptions,
    concurrency: o.concurrency ?? WORKER_DEFAULTS.concurrency,
    logger: o.logger,
    finalFlushMs: o.finalFlushMs ?? FINAL_FLUSH_DEFAULT_MS,
    memoryDeleteAfterMs: o.memoryDeleteAfterMs ?? MEMORY_DELETE_AFTER_DEFAULT_MS,
    stateDir: o.stateDir,
    memoryBufferBytes: o.memoryBufferBytes ?? MEMORY_BUFFER_DEFAULT_BYTES,
    memoryCacheBytes: o.memoryCacheBytes ?? MEMORY_CONTENT_CACHE_DEFAULT_BYTES,
    pathWaitMs: o.pathWaitMs ?? PATH_WAIT_DEFAULT_MS,
    allowedMountRoots: o.allowedMountRoots ?? [],
    mountTimeoutMs: o.mountTimeoutMs ?? MOUNT_TIMEOUT_DEFAULT_MS,
    clock: o.clock ?? monotonicClock,
  };
}
