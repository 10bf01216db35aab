import type { WorkerEventMap } from '../worker/events.js';

type FinishReport = NonNullable<WorkerEventMap['sessionEnded'][0]['flush']>;

/** What the worker's events say happened to one store during the demo. */
export interface StoreTally {
  root: string | undefined;
  downloaded: number;
  uploaded: number;
  conflicts: number;
  remoteDeletes: number;
  localDeletes: number;
  refusedEvents: number;
  syncs: number;
  /** Duration of the end-of-session `final` sync reported for this store, ms. */
  finalMs: number | undefined;
  /** Duration of the end-of-session `flush` reported for this store, ms. */
  flushMs: number | undefined;
  flushCutOffs: number;
  unmounted: boolean | undefined;
}

export interface DemoTally {
  claims: number;
  stores: Map<string, StoreTally>;
  outcomes: Array<WorkerEventMap['sessionEnded'][0]['outcome']>;
  /** `final` and `flush` durations reported for the whole session (events without a store id), ms. */
  session: { finalMs: number | undefined; flushMs: number | undefined };
  /** `flushCutOff` events, whole session (the event names no store). */
  flushCutOffs: number;
  /** The end-of-session final sync + flush reports carried by `sessionEnded`. */
  finishes: FinishReport[];
}

export function emptyDemoTally(): DemoTally {
  return { claims: 0, stores: new Map(), outcomes: [], session: { finalMs: undefined, flushMs: undefined }, flushCutOffs: 0, finishes: [] };
}

export function emptyStoreTally(): StoreTally {
  return {
    root: undefined,
    downloaded: 0,
    uploaded: 0,
    conflicts: 0,
    remoteDeletes: 0,
    localDeletes: 0,
    refusedEvents: 0,
    syncs: 0,
    finalMs: undefined,
    flushMs: undefined,
    flushCutOffs: 0,
    unmounted: undefined,
  };
}

type Emitter = { on<K extends keyof WorkerEventMap>(name: K, listener: (...args: WorkerEventMap[K]) => void): unknown };

/**
 * Count the worker's events per store, and print one line per claim, mount, sync, conflict,
 * delete, refusal, flush and unmount through `line`. `nameOf` turns a store id into its name.
 */
export function tallyWorkerEvents(worker: Emitter, nameOf: (storeId: string) => string, line: (text: string) => void): DemoTally {
  const tally = emptyDemoTally();
  const store = (id: string): StoreTally => {
    let t = tally.stores.get(id);
    if (!t) tally.stores.set(id, (t = emptyStoreTally()));
    return t;
  };

  worker.on('workClaimed', (e) => {
    tally.claims += 1;
    line(`claim     work ${e.workId} for session ${e.sessionId ?? '-'}`);
  });
  worker.on('mounted', (e) => {
    store(e.storeId).root = e.root;
    line(`mount     ${nameOf(e.storeId)} -> ${e.root} (${e.memories} memories, ${Math.round(e.durationMs)} ms)`);
  });
  worker.on('downloaded', (e) => void (store(e.storeId).downloaded += 1));
  worker.on('uploaded', (e) => {
    store(e.storeId).uploaded += 1;
    line(`upload    ${nameOf(e.storeId)}: /${e.path} (${e.created ? 'created' : 'updated'})`);
  });
  worker.on('conflict', (e) => {
    store(e.storeId).conflicts += 1;
    line(`conflict  ${nameOf(e.storeId)}: /${e.path} changed on both sides; the store's version wins`);
  });
  worker.on('deleted', (e) => {
    const t = store(e.storeId);
    if (e.side === 'remote') t.remoteDeletes += 1;
    else t.localDeletes += 1;
    line(`delete    ${nameOf(e.storeId)}: /${e.path} (${e.side === 'remote' ? 'memory deleted in the store' : 'local file removed'})`);
  });
  worker.on('refused', (e) => {
    store(e.storeId).refusedEvents += 1;
    line(`refused   ${nameOf(e.storeId)}: /${e.path} (${e.reason})`);
  });
  worker.on('synced', (e) => {
    const r = e.report;
    const key = e.phase === 'final' ? 'finalMs' : 'flushMs';
    if (e.storeId !== undefined) {
      const t = store(e.storeId);
      if (e.phase === 'sync') t.syncs += 1;
      else t[key] = (t[key] ?? 0) + r.durationMs;
    } else if (e.phase !== 'sync') {
      tally.session[key] = (tally.session[key] ?? 0) + r.durationMs;
    }
    // Session-wide reports repeat the per-store lines, except the flush, which is only reported whole.
    if (e.storeId === undefined && e.phase !== 'flush') return;
    const who = e.storeId !== undefined ? nameOf(e.storeId) : 'all stores';
    line(
      `${e.phase.padEnd(9)} ${who}: up ${r.uploads}, down ${r.downloads}, conflicts ${r.conflicts}, deletes ${r.deletes}, refused ${r.refusals} (${Math.round(r.durationMs)} ms)`,
    );
  });
  worker.on('flushCutOff', (e) => {
    tally.flushCutOffs += 1;
    for (const t of tally.stores.values()) t.flushCutOffs += 1;
    line(`cut-off   ${e.phase} stopped at its ${e.boundMs} ms bound with ${e.pendingUploads} uploads pending`);
  });
  worker.on('unmounted', (e) => {
    store(e.storeId).unmounted = e.removed;
    line(`unmount   ${nameOf(e.storeId)}: folder ${e.removed ? 'removed' : `kept (${e.reason ?? 'no reason given'})`}`);
  });
  worker.on('sessionEnded', (e) => {
    tally.outcomes.push(e.outcome);
    if (e.flush) tally.finishes.push(e.flush);
    line(`end       session ${e.sessionId}: ${e.outcome.status}${e.outcome.error ? ` (${e.outcome.error.message})` : ''}`);
  });
  worker.on('workFailed', (e) => line(`failed    work ${e.workId}: ${e.error.message}`));
  return tally;
}
