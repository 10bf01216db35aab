/** Counters and gauges of one worker, as a plain object (JSON-serialisable). */
export interface WorkerMetricsSnapshot {
  itemsClaimed: number;
  itemsCompleted: number;
  itemsFailed: number;
  sessionsActive: number;
  leaseLosses: number;
  uploads: number;
  downloads: number;
  conflicts: number;
  deletes: number;
  flushCutOffs: number;
  syncs: number;
  syncDurationMsTotal: number;
  /** Connections the sandboxes' egress proxies refused. */
  egressRefused: number;
  /** Tool calls during which a sandbox's memory limit killed a process. */
  sandboxMemoryLimitHits: number;
  /** Tool calls during which a sandbox's process limit refused a fork. */
  sandboxProcessLimitHits: number;
  /** Times a sandbox's `/tmp` or `/dev/shm` was found full after a call. */
  sandboxTmpFull: number;
}

type Counter = Exclude<keyof WorkerMetricsSnapshot, 'sessionsActive'>;

/** Mutable counters behind {@link WorkerMetricsSnapshot}; `snapshot()` hands out a copy. */
export class WorkerMetrics {
  readonly #counts: Record<Counter, number> = {
    itemsClaimed: 0,
    itemsCompleted: 0,
    itemsFailed: 0,
    leaseLosses: 0,
    uploads: 0,
    downloads: 0,
    conflicts: 0,
    deletes: 0,
    flushCutOffs: 0,
    syncs: 0,
    syncDurationMsTotal: 0,
    egressRefused: 0,
    sandboxMemoryLimitHits: 0,
    sandboxProcessLimitHits: 0,
    sandboxTmpFull: 0,
  };

  add(name: Counter, by = 1): void {
    this.#counts[name] += by;
  }

  snapshot(sessionsActive: number): WorkerMetricsSnapshot {
    return { ...this.#counts, sessionsActive };
  }
}
