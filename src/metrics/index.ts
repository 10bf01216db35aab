export { serveMetrics, readiness, type MetricsServer, type MetricsServerOptions, type Readiness } from './metrics-server.js';
export { createPrometheusMetrics, type PrometheusMetrics, type PrometheusMetricsOptions } from './prometheus-metrics.js';
export type { WorkQueueSource, WorkQueueStats } from './work-queue.js';
export type { ObservedWorker } from './observed-worker.js';
