/**
 * `managed-agents-worker`: runs Claude Managed Agents sessions of a self-hosted environment on this
 * machine, with their memory stores mounted as folders and kept in sync. {@link EnvironmentWorker}
 * claims and serves the work; {@link createWebhookHandler} serves it from webhook deliveries,
 * {@link Launcher} starts one sandbox command per item, and {@link serveMetrics} exports health and
 * Prometheus metrics. Every error thrown is a {@link WorkerError} with a stable `code`.
 * @packageDocumentation
 */
export * from './errors.js';
export { createLogger, REDACT_PATHS } from './internal/logger.js';
export { EnvironmentWorker } from './worker/environment-worker.js';
export type {
  HandleItemOptions,
  ItemOutcome,
  ItemStatus,
  WorkerEventMap,
  WorkerMetricsSnapshot,
  EnvironmentWorkerOptions,
  EnvironmentWorkerTools,
} from './worker/environment-worker.js';
export { decodeWorkSecret, encodeWorkSecret } from './worker/credentials.js';
export type { SandboxMode, SandboxOption, SandboxSettings } from './sandbox/options.js';
export type { SandboxLimits } from './sandbox/limits/limits.js';
export type { SandboxNetworkOption } from './sandbox/network/network-option.js';
export { MEMORY_SYNC_INTERVAL_DEFAULT_MS, MEMORY_SYNC_INTERVAL_MIN_MS, FINAL_FLUSH_DEFAULT_MS } from './worker/options.js';
export {
  createWebhookHandler,
  type WebhookHandler,
  type WebhookHandlerOptions,
  type WebhookRequest,
  type WebhookResponse,
  type WebhookWorker,
} from './webhook/index.js';
export {
  serveMetrics,
  createPrometheusMetrics,
  readiness,
  type MetricsServer,
  type MetricsServerOptions,
  type PrometheusMetrics,
  type PrometheusMetricsOptions,
  type ObservedWorker,
  type Readiness,
  type WorkQueueSource,
  type WorkQueueStats,
} from './metrics/index.js';
export {
  Launcher,
  SANDBOX_ENV_VARS,
  SANDBOX_BASE_ENV_VARS,
  type LauncherOptions,
  type LauncherEventMap,
  type SandboxExit,
} from './launcher/index.js';
