/**
 * Every default and bound a caller can set or see, defined once. The option schemas, the CLI help
 * text and error messages read them from here; `test/internal/defaults.test.ts` checks docs/options.md's
 * option table against them. Internal timings used in one place only (heartbeat floors, backoff
 * policy, idle reminder) stay beside the code that uses them.
 */

/** Limits of the Memory Stores API the worker keeps on its side (the emulator enforces the same). */
export const API_LIMITS = {
  /** Most memory stores one session may attach. */
  storesPerSession: 8,
  /** Most memories one store may hold. */
  memoriesPerStore: 2_000,
  /** Largest memory content the API accepts, in bytes. */
  memoryBytes: 102_400,
  /** Longest a work poll may ask the server to hold it (`block_ms`). */
  pollBlockMaxMs: 999,
} as const;

/**
 * Bounds on the work-queue calls, shared by the worker, the launcher and the webhook drain, so a
 * hung request never outlives them.
 */
export const WORK_CALL_CUT_OFFS = {
  /** One poll: with `block_ms` at most 999 an answer takes about a second. */
  pollMs: 60_000,
  /** One ack. */
  ackMs: 30_000,
  /** One force-stop (close() must stay bounded). */
  stopMs: 15_000,
} as const;

/** `EnvironmentWorker` options. */
export const WORKER_DEFAULTS = {
  /** Sessions `run()` serves at once. */
  concurrency: 1,
  concurrencyMax: 64,
  /** What a local deletion does on the server. */
  memorySyncDeletions: 'enabled',
  /** How long a session waits for a mount path another session of this process holds. */
  pathWaitMs: 60_000,
  /** Bound of a session's whole mount (listing and downloading every store). */
  mountTimeoutMs: 300_000,
  mountTimeoutMinMs: 1_000,
  mountTimeoutMaxMs: 3_600_000,
  /** The SDK runner's own idle bound; the worker passes `maxIdleMs` on only when it is set. */
  maxIdleMs: 60_000,
  /** Largest `--max-idle` the CLI accepts. */
  maxIdleMaxMs: 86_400_000,
} as const;

/** Memory options, shared by the worker, the CLI and the SyncLoop. */
export const MEMORY_DEFAULTS = {
  /** Least time between two syncs; `null` turns memory off. */
  syncIntervalMs: 15_000,
  syncIntervalMinMs: 5_000,
  /** Largest `--memory-sync-interval` the CLI accepts. */
  syncIntervalMaxMs: 86_400_000,
  /** Bound of the end-of-session final sync plus flush. */
  finalFlushMs: 30_000,
  finalFlushMinMs: 1,
  finalFlushMaxMs: 600_000,
  /** How long a file must have been gone before its memory is deleted in the store. */
  deleteAfterMs: 30_000,
  deleteAfterMaxMs: 86_400_000,
  /** Bound of one memory request (time to response headers) and of reading its body. */
  requestTimeoutMs: 60_000,
  /** Memory content one mount holds at once (listing pages in flight plus files waiting to be written). */
  bufferBytes: 4 * 1024 * 1024,
  bufferMinBytes: 1024 * 1024,
  bufferMaxBytes: 1024 * 1024 * 1024,
  /** Bound of the content cache in the state folder, in bytes (512 MiB); 0 turns it off. */
  contentCacheBytes: 512 * 1024 * 1024,
  /** Largest content cache bound accepted (1 TiB). */
  contentCacheMaxBytes: 2 ** 40,
} as const;

/** `Launcher` options. */
export const LAUNCHER_DEFAULTS = {
  concurrency: 1,
  concurrencyMax: 256,
  /** Delay between the SIGTERM and the SIGKILL of a sandbox still running after close(). */
  killAfterMs: 60_000,
  killAfterMaxMs: 3_600_000,
} as const;

/** `createWebhookHandler` options. */
export const WEBHOOK_DEFAULTS = {
  concurrency: 1,
  concurrencyMax: 64,
  /** Largest accepted request body: 1 MiB. */
  maxBodyBytes: 1024 * 1024,
  /** Largest `maxBodyBytes` accepted: 64 MiB (a webhook event is a few hundred bytes). */
  maxBodyBytesLimit: 64 * 1024 * 1024,
  /** Webhook ids remembered to drop redeliveries. */
  dedupeWindow: 10_000,
} as const;

/** `serveMetrics` options. */
export const METRICS_DEFAULTS = {
  /** `/readyz` fails once the last successful poll is older than this. */
  readyWithinMs: 60_000,
  /** Prefix of every metric name. */
  prefix: 'maw_',
} as const;
