/** Counters and gauges of one worker, as a plain object (JSON-serialisable). */
export interface WorkerMetricsSnapshot {
  /** Work items started, from the poller or `handleItem()`. */
  itemsClaimed: number;
  /** Work items that ended `completed`, `skipped` or `stopped_by_server`. */
  itemsCompleted: number;
  /** Work items that ended `failed`. */
  itemsFailed: number;
  /** Sessions running now (a gauge). */
  sessionsActive: number;
  /** Leases lost (told by the server, or assumed after the TTL passed without a heartbeat). */
  leaseLosses: number;
  /** Files written to memory stores. */
  uploads: number;
  /** Memories written to local files. */
  downloads: number;
  /** Files changed on both sides (the store's version won). */
  conflicts: number;
  /** Deletions carried over, to the stores or to the local folders. */
  deletes: number;
  /** Final syncs or flushes that ran out of their bound (`finalFlushMs`). */
  flushCutOffs: number;
  /** Syncs of a session's stores (one per pass over all of them). */
  syncs: number;
  /** Milliseconds spent in those syncs, summed. */
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
