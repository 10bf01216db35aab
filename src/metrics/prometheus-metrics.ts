import type { Registry } from 'prom-client';
import { promClient } from './prom-client.js';
import { METRICS_DEFAULTS } from '../internal/defaults.js';
import type { WorkerEventMap } from '../worker/events.js';
import type { ObservedWorker } from './observed-worker.js';

/** Options of {@link createPrometheusMetrics} (and of {@link serveMetrics}, which passes them on). */
export interface PrometheusMetricsOptions {
  /** Registry to register into. Default: a new one, so two workers in a process never clash. */
  registry?: Registry;
  /** Prefix of every metric name. Default `maw_`. */
  prefix?: string;
  /** Also export Node's process metrics (CPU, memory, event loop lag). Default true. */
  processMetrics?: boolean;
}

/** A worker's Prometheus metrics, registered in `registry` and fed by its events until `dispose()`. */
export interface PrometheusMetrics {
  /** The prom-client registry the metrics are in; serve it with `registry.metrics()`. */
  readonly registry: Registry;
  /** Stop listening to the worker (the registry keeps its last values). */
  dispose(): void;
}

/** Sync duration buckets, seconds: a quiet sync takes milliseconds, a final flush is bounded at 30 s. */
const SYNC_BUCKETS_S = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const READY_BUCKETS_S = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * Prometheus metrics of one worker, fed only by its events (and its `activeSessions` gauge at
 * scrape time), so the worker itself knows nothing about Prometheus.
 */
export function createPrometheusMetrics(worker: ObservedWorker, options: PrometheusMetricsOptions = {}): PrometheusMetrics {
  const { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } = promClient();
  const registry = options.registry ?? new Registry();
  const p = options.prefix ?? METRICS_DEFAULTS.prefix;
  const registers = [registry];
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: p });

  const claimed = new Counter({
    name: `${p}items_claimed_total`,
    help: 'Work items claimed (polled and acknowledged, or handed to handleItem).',
    registers,
  });
  const failed = new Counter({ name: `${p}items_failed_total`, help: 'Work items that failed.', registers });
  const finished = new Counter({
    name: `${p}items_finished_total`,
    help: 'Sessions ended, by outcome status.',
    labelNames: ['status'],
    registers,
  });
  new Gauge({
    name: `${p}sessions_active`,
    help: 'Sessions running now.',
    registers,
    collect() {
      this.set(worker.activeSessions);
    },
  });
  new Gauge({
    name: `${p}worker_closing`,
    help: '1 once close() was called or the signal aborted.',
    registers,
    collect() {
      this.set(worker.closing ? 1 : 0);
    },
  });
  const leaseLosses = new Counter({
    name: `${p}lease_losses_total`,
    help: 'Leases lost (412) or assumed lost (no heartbeat answer within the TTL).',
    labelNames: ['reason'],
    registers,
  });
  const pollFailures = new Counter({ name: `${p}poll_failures_total`, help: 'Polls that failed (retried with backoff).', registers });
  const syncDuration = new Histogram({
    name: `${p}memory_sync_duration_seconds`,
    help: 'Duration of memory syncs, by phase (sync, final, flush).',
    labelNames: ['phase'],
    buckets: SYNC_BUCKETS_S,
    registers,
  });
  const ready = new Histogram({
    name: `${p}session_ready_seconds`,
    help: 'Claim to first tool call possible (stores mounted).',
    buckets: READY_BUCKETS_S,
    registers,
  });
  const uploads = new Counter({ name: `${p}memory_uploads_total`, help: 'Memories uploaded (created or updated).', registers });
  const downloads = new Counter({ name: `${p}memory_downloads_total`, help: 'Memories written to disk from the store.', registers });
  const conflicts = new Counter({
    name: `${p}memory_conflicts_total`,
    help: 'Files changed on both sides; the store version won.',
    registers,
  });
  const deletes = new Counter({
    name: `${p}memory_deletes_total`,
    help: 'Memories deleted, by side (local file or remote memory).',
    labelNames: ['side'],
    registers,
  });
  const refusals = new Counter({
    name: `${p}memory_refusals_total`,
    help: 'Uploads refused for good (too large, invalid path) until the file changes.',
    registers,
  });
  const cutOffs = new Counter({
    name: `${p}memory_flush_cutoffs_total`,
    help: 'Final syncs or flushes cut off at their time bound, by phase.',
    labelNames: ['phase'],
    registers,
  });
  const egressRefused = new Counter({
    name: `${p}sandbox_egress_refused_total`,
    help: "Connections a session sandbox's egress proxy refused, by rule.",
    labelNames: ['rule'],
    registers,
  });

  const listeners: { [K in keyof WorkerEventMap]?: (...args: WorkerEventMap[K]) => void } = {
    workClaimed: () => claimed.inc(),
    workFailed: () => failed.inc(),
    sessionEnded: (e) => finished.inc({ status: e.outcome.status }),
    leaseLost: (e) => leaseLosses.inc({ reason: e.reason }),
    pollFailed: () => pollFailures.inc(),
    sessionStarted: (e) => ready.observe(e.readyMs / 1000),
    synced: (e) => syncDuration.observe({ phase: e.phase }, e.report.durationMs / 1000),
    uploaded: () => uploads.inc(),
    downloaded: () => downloads.inc(),
    conflict: () => conflicts.inc(),
    deleted: (e) => deletes.inc({ side: e.side }),
    refused: () => refusals.inc(),
    flushCutOff: (e) => cutOffs.inc({ phase: e.phase }),
    egressRefused: (e) => egressRefused.inc({ rule: e.rule }),
  };
  const entries = Object.entries(listeners) as Array<[keyof WorkerEventMap, (...a: unknown[]) => void]>;
  const emitter = worker as unknown as {
    on(n: string, l: (...a: unknown[]) => void): void;
    off(n: string, l: (...a: unknown[]) => void): void;
  };
  for (const [name, listener] of entries) emitter.on(name, listener);

  return {
    registry,
    dispose() {
      for (const [name, listener] of entries) emitter.off(name, listener);
    },
  };
}
