export * from './errors.js';
export { createLogger, REDACT_PATHS } from './internal/logger.js';
export { EnvironmentWorker } from './worker/environment-worker.js';
export type { HandleItemOptions, ItemOutcome, ItemStatus, WorkerEventMap, WorkerMetricsSnapshot, EnvironmentWorkerOptions, EnvironmentWorkerTools } from './worker/environment-worker.js';
export { decodeWorkSecret, encodeWorkSecret } from './worker/credentials.js';
export { MEMORY_SYNC_INTERVAL_DEFAULT_MS, MEMORY_SYNC_INTERVAL_MIN_MS, FINAL_FLUSH_DEFAULT_MS } from './worker/options.js';
