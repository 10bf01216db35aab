import { EventEmitter, setMaxListeners } from 'node:events';
import * as fsp from 'node:fs/promises';
import type Anthropic from '@anthropic-ai/sdk';
import { coerceError, StateFileError } from '../errors.js';
import { combineSignals, isAbortError } from '../internal/abort.js';
import { monotonicClock, type Clock } from '../internal/clock.js';
import { childLogger, errorSummary, resolveLogger, snakeCaseKeys, type Logger } from '../internal/logger.js';
import { ConflictCopies, conflictStamp } from './conflict-copies.js';
import { emptyReport, executePlan } from './executor.js';
import { isUnderSkipped, scanLocal, type LocalScan } from './local-scan.js';
import { MARKER_FILE_NAME, isValidMarker, markerContent } from './marker.js';
import type { MountedSession, MountedStore } from './mounted.js';
import type { SkippedEntry } from './local-dir.js';
import { groupCaseCollisions, remotePathToRel } from './paths.js';
import { isRemoteWrite, planSync, type RemoteEntry, type SyncPhase } from './plan.js';
import { RemoteStore, isPathConflictReason, type RemoteMemory } from './remote-store.js';
import { safeEmit } from '../internal/safe-emit.js';
import { defaultStateDir } from './state-dir.js';
import { cloneSyncState, completeGeneration } from './sync-state.js';
import type { MemoryDeleteMode, MemoryEventMap, StoreSyncState, SyncReport } from './types.js';

export {
  MEMORY_SYNC_INTERVAL_DEFAULT_MS as SYNC_INTERVAL_DEFAULT_MS,
  MEMORY_SYNC_INTERVAL_MIN_MS as SYNC_INTERVAL_MIN_MS,
  FINAL_FLUSH_DEFAULT_MS,
} from './options.js';
import {
  FINAL_FLUSH_DEFAULT_MS,
  MEMORY_DELETE_AFTER_DEFAULT_MS as DELETE_AFTER_DEFAULT_MS,
  MEMORY_SYNC_INTERVAL_DEFAULT_MS as SYNC_INTERVAL_DEFAULT_MS,
  checkMemoryOptions,
} from './options.js';

export interface SyncLoopOptions {
  /** Client whose credential may write the session's stores (the work item's sessions token). */
  client: Anthropic;
  /** What {@link MemoryMounter.mount} returned. */
  mounted: MountedSession;
  /** Least time between two syncs, in ms. Default 15 000, minimum 5 000. */
  intervalMs?: number;
  /** What a local deletion may do on the server. Default `enabled`. */
  deletions?: MemoryDeleteMode;
  /** Bound of the final sync and the flush together, in ms. Default 30 000. */
  finalFlushMs?: number;
  /**
   * Least time (ms, monotonic) a file must have been gone, and a later sync must confirm it, before
   * its memory is deleted in the store. Default 30 000. The final sync waives it.
   */
  deleteAfterMs?: number;
  /**
   * Which local deletions the final sync carries out: `all` (default), or only those an earlier
   * sync already saw (`corroborated`; recovering a leftover).
   * @internal
   */
  finalDeletes?: 'all' | 'corroborated';
  logger?: Logger;
  /** Where conflict copies go (`<stateDir>/conflicts/…`). Default `<os.tmpdir()>/managed-agents-worker`; set a persistent folder in production. */
  stateDir?: string;
  /** Content fetches and uploads in flight per store. Default 16. */
  concurrency?: number;
  /** Monotonic time source for every interval and bound. Default the process's monotonic clock. */
  clock?: Clock;
  /** Per-request timeout in ms. Default 60 000. */
  requestTimeoutMs?: number;
  /** Runs each sync pass (tracing wraps it in a span); default: runs it as is. */
  wrapSync?: SyncWrapper;
}

/** Runs one sync pass of `phase` given as `run`, and returns its report. */
export type SyncWrapper = (phase: SyncPhase, run: () => Promise<SyncReport>) => Promise<SyncReport>;

export interface FinishReport {
  /** The final sync's report (clean end only). */
  final?: SyncReport;
  flush: SyncReport;
  /** True when the bound expired (or the caller aborted) before the final sync and flush were done. */
  cutOff: boolean;
  /** Local changes that did not reach the store (uploads of a writable store left undone). */
  pendingUploads: number;
  /**
   * Files that differed from the store at the end (not uploaded, refused as binary or oversized,
   * our reserved temp names, read-only edits), each copied to `<stateDir>/unsaved/…` before its
   * folder went away: the copies made.
   */
  unsavedCopies: string[];
  /** Files that differed from the store but could not be copied (unreadable): their folder is kept. */
  uncopied: string[];
  durationMs: number;
  /** Folders removed / kept by the unmount. */
  removed: string[];
  kept: string[];
}

interface Unsaved {
  e: StoreEntry;
  rel: string;
  /** A local change of a writable store that should have been uploaded. */
  upload: boolean;
  /** False for entries that could not be read at all. */
  copyable: boolean;
}

interface StoreEntry {
  store: MountedStore;
  remote: RemoteStore;
  state: StoreSyncState;
  blockedPulls: Map<string, string>;
  /** Last marker problem warned about, so a skipped store is not warned every sync. */
  markerWarned: string | undefined;
  notSaved: string[];
}

/**
 * Keeps mounted folders and their stores in step (the rules: docs/design.md).
 *
 * Rules:
 * - at most one sync runs at a time; `afterToolCall` starts one when the interval has passed since
 *   the last one started, else arms a single trailing sync for when it has, so an edit made in the
 *   last tool call of a turn reaches the store within one interval;
 * - `beforeToolCall` runs a due sync first (or waits for the running one), so the agent does not
 *   read a memory already known to be stale;
 * - a sync reconciles all stores in parallel; one failed file or store never fails the pass, it is
 *   counted in `errors` and retried next sync; `syncNow` rejects only when its own signal aborts;
 * - a store whose marker is missing or altered is skipped with a warning; a folder wiped
 *   whole (marker gone, folder empty or removed) is downloaded again;
 * - a local delete is sent once a later sync confirms the file is still gone and it has been gone
 *   `deleteAfterMs`; the final sync waives both and is never capped; an entry the scan skipped
 *   (FIFO, symlink, unreadable) is never taken for a deletion;
 * - `finish` runs the final sync (clean end) and a push-only flush, the whole bounded by
 *   `finalFlushMs`; when the bound expires the requests in flight are aborted and `flushCutOff`
 *   is emitted; every file that still differs from the store is copied to the state folder
 *   (a folder holding one that cannot be copied is kept), deletions a clean end could not send
 *   are handed to the next session of the store, then the folders are unmounted and nothing
 *   touches them again;
 * - each sync commits its state to the mount, which rewrites the journal entry when it changed;
 * - every interval and bound reads the injected monotonic clock; a wall-clock jump changes nothing.
 */
export class SyncLoop extends EventEmitter<MemoryEventMap> {
  readonly #mounted: MountedSession;
  readonly #entries: StoreEntry[];
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #intervalMs: number;
  readonly #deletions: MemoryDeleteMode;
  readonly #finalFlushMs: number;
  readonly #deleteAfterMs: number;
  readonly #finalDeletes: 'all' | 'corroborated';
  readonly #concurrency: number;
  readonly #conflicts: ConflictCopies;
  readonly #wrapSync: SyncWrapper;
  #lastSyncAt: number;
  #running: Promise<SyncReport> | undefined;
  #runningCtrl: AbortController | undefined;
  #trailing: NodeJS.Timeout | undefined;
  /** Tool calls between `beforeToolCall` and `afterToolCall`; the trailing sync never lands inside one. */
  #toolCallsInFlight = 0;
  #finishing: Promise<FinishReport> | undefined;
  #disposed = false;

  constructor(opts: SyncLoopOptions) {
    super();
    const intervalMs = opts.intervalMs ?? SYNC_INTERVAL_DEFAULT_MS;
    const finalFlushMs = opts.finalFlushMs ?? FINAL_FLUSH_DEFAULT_MS;
    checkMemoryOptions(
      { memorySyncIntervalMs: intervalMs, finalFlushMs, ...(opts.deleteAfterMs !== undefined ? { memoryDeleteAfterMs: opts.deleteAfterMs } : {}) },
      'SyncLoop options',
    );
    this.#mounted = opts.mounted;
    this.#intervalMs = intervalMs;
    this.#finalFlushMs = finalFlushMs;
    this.#deletions = opts.deletions ?? 'enabled';
    this.#deleteAfterMs = opts.deleteAfterMs ?? DELETE_AFTER_DEFAULT_MS;
    this.#finalDeletes = opts.finalDeletes ?? 'all';
    this.#concurrency = Math.max(1, Math.floor(opts.concurrency ?? 16));
    this.#clock = opts.clock ?? monotonicClock;
    this.#log = childLogger(resolveLogger(opts.logger), { component: 'memory-sync', session_id: opts.mounted.sessionId });
    this.#conflicts = new ConflictCopies(opts.stateDir ?? defaultStateDir());
    this.#wrapSync = opts.wrapSync ?? ((_phase, run) => run());
    this.#entries = opts.mounted.stores.map((store) => {
      return {
        store,
        remote: new RemoteStore(opts.client, store.storeId, { requestTimeoutMs: opts.requestTimeoutMs }),
        state: cloneSyncState(store.state),
        blockedPulls: new Map(),
        markerWarned: undefined,
        notSaved: [],
      };
    });
    // The download counts as the first sync.
    this.#lastSyncAt = this.#clock.now();
  }

  /**
   * Call right before a tool runs, and pair it with {@link afterToolCall} once the tool is done
   * (in a `finally`): between the two, no trailing sync starts, so a sync never scans a file the
   * tool is half-way through writing.
   */
  async beforeToolCall(): Promise<void> {
    try {
      if (this.#closed()) return;
      if (this.#running) {
        await this.#running;
        return;
      }
      if (this.#due()) await this.#startSync();
    } catch (err) {
      this.#log.warn({ error: errorSummary(coerceError(err)) }, 'memory sync before a tool call failed; the tool call runs anyway');
    } finally {
      this.#toolCallsInFlight++;
    }
  }

  afterToolCall(): void {
    this.#toolCallsInFlight = Math.max(0, this.#toolCallsInFlight - 1);
    try {
      if (this.#closed()) return;
      if (!this.#running && this.#due()) {
        void this.#startSync().catch(() => {});
        return;
      }
      this.#armTrailing();
    } catch (err) {
      this.#log.warn({ error: errorSummary(coerceError(err)) }, 'memory sync after a tool call failed');
    }
  }

  /**
   * Reconcile every store now (after the running sync, if any). Resolves with the counts; rejects
   * only when `signal` aborts. After `finish`, resolves with an empty report and touches nothing.
   */
  async syncNow(opts: { signal?: AbortSignal } = {}): Promise<SyncReport> {
    if (this.#closed()) return emptyReport();
    while (this.#running) {
      await this.#running.catch(() => {});
      if (this.#closed()) return emptyReport();
    }
    return this.#startSync(opts.signal);
  }

  /**
   * End the session: final sync (clean end), flush, copies of what differs, unmount.
   * `keepIfIncomplete`: when the store could not be reached or the bound cut the end off, keep the
   * folders (handed back in the journal) instead of removing them, so a later attempt uploads what
   * is there (recovery uses it). @internal
   */
  finish(opts: { clean: boolean; signal?: AbortSignal; keepIfIncomplete?: boolean }): Promise<FinishReport> {
    this.#finishing ??= this.#finish(opts);
    return this.#finishing;
  }

  snapshot(): StoreSyncState[] {
    return this.#entries.map((e) => cloneSyncState(e.state));
  }

  #closed(): boolean {
    return this.#disposed || this.#finishing !== undefined || this.#mounted.disposed;
  }

  #due(): boolean {
    return this.#clock.now() - this.#lastSyncAt >= this.#intervalMs;
  }

  #armTrailing(): void {
    if (this.#trailing || this.#closed()) return;
    const waitMs = Math.max(0, this.#intervalMs - (this.#clock.now() - this.#lastSyncAt));
    this.#trailing = setTimeout(() => {
      this.#trailing = undefined;
      if (this.#closed()) return;
      // A tool is running: its afterToolCall starts the due sync once the tool is done.
      if (this.#toolCallsInFlight > 0) return;
      if (this.#running) {
        // Re-check once the running sync is over.
        void this.#running.finally(() => this.#armTrailing()).catch(() => {});
        return;
      }
      if (this.#due()) void this.#startSync().catch(() => {});
      else this.#armTrailing();
    }, waitMs);
    this.#trailing.unref();
  }

  #startSync(signal?: AbortSignal, phase: SyncPhase = 'sync'): Promise<SyncReport> {
    const ctrl = new AbortController();
    const combined = combineSignals([signal, ctrl.signal]);
    // Every request in flight listens on this one signal.
    setMaxListeners(10_000, combined.signal);
    this.#runningCtrl = ctrl;
    this.#lastSyncAt = this.#clock.now();
    // This sync covers every tool call made so far: a trailing sync armed before it is not needed.
    if (this.#trailing) clearTimeout(this.#trailing);
    this.#trailing = undefined;
    const run = this.#wrapSync(phase, () => this.#syncAll(phase, combined.signal)).finally(() => {
      combined.dispose();
      if (this.#running === run) {
        this.#running = undefined;
        this.#runningCtrl = undefined;
      }
    });
    this.#running = run;
    return run.then((report) => {
      if (signal?.aborted) throw coerceError(signal.reason);
      return report;
    });
  }

  async #syncAll(phase: SyncPhase, signal: AbortSignal): Promise<SyncReport> {
    const started = this.#clock.now();
    const stamp = conflictStamp();
    const reports = await Promise.all(this.#entries.map((e) => this.#syncStore(e, phase, signal, stamp)));
    const total = emptyReport();
    for (const r of reports) addReport(total, r);
    total.durationMs = this.#clock.now() - started;
    const level = total.errors > 0 ? 'warn' : 'debug';
    this.#log[level]({ phase, ...snakeCaseKeys(total) }, 'memory sync done');
    safeEmit(this, this.#log, 'synced', { storeId: undefined, report: total, phase });
    return total;
  }

  async #syncStore(e: StoreEntry, phase: SyncPhase, signal: AbortSignal, stamp: string): Promise<SyncReport> {
    const started = this.#clock.now();
    const report = emptyReport();
    const log = e.store.log;
    e.notSaved = [];
    try {
      if (this.#isDisposed()) return report;
      const ready = await this.#checkFolder(e, phase);
      if (ready === 'skip') {
        report.skippedStores++;
        return report;
      }
      if (ready === 'rebuilt') {
        // Folder wiped with its marker: start over as after a fresh mount, so every memory is
        // downloaded again and nothing is deleted in the store, whatever the baseline's size.
        e.state = { ...e.state, baseline: {}, pendingDeletes: {}, refused: {} };
      }
      // The listing does not depend on the scan, so both run at once (a flush lists only when
      // the scan found local changes).
      const listing = phase === 'flush' ? undefined : e.remote.listBasic(signal);
      listing?.catch(() => {});
      const scan = await scanLocal(e.store.dir, e.store.cache, { exclude: new Set(Object.keys(e.state.shadowed)), concurrency: this.#concurrency });
      log.debug({ phase, files: scan.entries.size, files_read: scan.filesRead }, 'local scan done');
      this.#warnSkipped(e, scan);
      if (phase === 'flush' && !hasLocalChanges(e.state, scan)) return report;
      if (signal.aborted) throw coerceError(signal.reason);

      const listed = await (listing ?? e.remote.listBasic(signal));
      const { remote, byRel } = this.#remoteView(e, listed);
      e.state = releaseResolvedPathConflicts(e.state, remote);
      const plan = planSync({
        state: e.state,
        local: scan.entries,
        remote,
        deletions: this.#deletions,
        phase,
        nowMs: this.#clock.now(),
        deleteAfterMs: this.#deleteAfterMs,
        finalDeletes: this.#finalDeletes,
        skipped: skippedTest(scan),
      });
      if (plan.wiped) log.warn('the folder was emptied; downloading the store again instead of deleting its memories');
      if (plan.actions.some(isRemoteWrite) && !(await this.#markerValid(e))) {
        // The marker went away between the scan and the uploads: push and delete nothing.
        this.#markerProblem(e, 'marker .anthropic-memory-store vanished or changed during the sync');
        report.skippedStores++;
        return report;
      }
      const result = await executePlan(
        {
          storeId: e.store.storeId,
          dir: e.store.dir,
          cache: e.store.cache,
          remote: e.remote,
          log,
          conflicts: this.#conflicts,
          stamp,
          scan,
          listed: byRel,
          concurrency: this.#concurrency,
          signal,
          disposed: () => this.#isDisposed(),
          emit: (event, ...args) => safeEmit(this, log, event, ...args),
          blockedPulls: e.blockedPulls,
          lastPass: phase !== 'sync',
        },
        e.state,
        plan,
      );
      e.state = result.state;
      e.notSaved = result.notSaved;
      addReport(report, result.report);
      if (!signal.aborted) e.state = completeGeneration(e.state, phase);
    } catch (err) {
      if (signal.aborted || isAbortError(err) || this.#isDisposed()) {
        log.debug({ phase }, 'memory sync aborted (or outlived the unmount)');
      } else {
        report.errors++;
        log.warn(
          { error: errorSummary(coerceError(err)), phase },
          phase === 'sync' ? 'memory sync of this store failed; retried next sync' : 'memory sync of this store failed at the end; what differs is copied out',
        );
      }
    }
    // The journal follows every sync that changed the state (a no-op write is skipped).
    await e.store.commit(e.state);
    report.durationMs = this.#clock.now() - started;
    if (changedSomething(report)) log.info({ phase, ...snakeCaseKeys(report) }, 'memory sync changed this store');
    safeEmit(this, log, 'synced', { storeId: e.store.storeId, report: { ...report }, phase });
    return report;
  }

  /**
   * The marker check. `ok`: the folder is bound to this store. A folder wiped whole (removed,
   * or marker gone and empty) is re-created with its marker and downloaded again by the plan.
   */
  async #checkFolder(e: StoreEntry, phase: SyncPhase): Promise<'ok' | 'rebuilt' | 'skip'> {
    const { dir, log } = e.store;
    const rootPresent = await dir.rootExists();
    if (!rootPresent) {
      const st = await fsp.lstat(dir.root).catch(() => undefined);
      if (st !== undefined) return this.#markerProblem(e, `${dir.root} is no longer a real folder`);
      if (phase === 'flush') return 'skip';
      await dir.createRoot();
      await dir.writeMarker(markerContent(e.store.storeId));
      log.warn({ root: dir.root }, 'the store folder was removed; re-created and downloading again');
      return 'rebuilt';
    }
    const marker = await dir.readMarker();
    if (marker !== undefined && isValidMarker(marker, e.store.storeId)) {
      e.markerWarned = undefined;
      return 'ok';
    }
    // A folder, symlink or FIFO where the marker goes is an altered marker, never one to write over
    // (the rename would fail every sync, and a folder there may hold the agent's files).
    const markerStat = await dir.lstat(MARKER_FILE_NAME);
    if (markerStat !== undefined && !markerStat.isFile()) {
      return this.#markerProblem(e, `marker ${MARKER_FILE_NAME} is altered (not a regular file)`);
    }
    if (await dir.isEmpty()) {
      if (phase === 'flush') return 'skip';
      await dir.writeMarker(markerContent(e.store.storeId));
      log.warn({ root: dir.root }, 'the store folder was emptied, marker included; downloading again');
      return 'rebuilt';
    }
    return this.#markerProblem(e, `marker .anthropic-memory-store is ${marker === undefined ? 'missing' : 'altered'}`);
  }

  async #markerValid(e: StoreEntry): Promise<boolean> {
    const marker = await e.store.dir.readMarker().catch(() => undefined);
    return marker !== undefined && isValidMarker(marker, e.store.storeId);
  }

  #markerProblem(e: StoreEntry, problem: string): 'skip' {
    if (e.markerWarned !== problem) {
      e.markerWarned = problem;
      e.store.log.warn(
        { root: e.store.root },
        `${problem}; this folder is not synced (nothing uploaded, nothing deleted) until the marker holds "version 1\\n${e.store.storeId}" again`,
      );
    }
    return 'skip';
  }

  /** The listing keyed by store-relative path, with unusable and case-colliding paths shadowed. */
  #remoteView(e: StoreEntry, listed: RemoteMemory[]): { remote: Map<string, RemoteEntry>; byRel: Map<string, RemoteMemory> } {
    const byRel = new Map<string, RemoteMemory>();
    const shadowed: Record<string, { reason: string }> = {};
    const keepShadow = (key: string, reason: string): void => {
      if (!Object.hasOwn(e.state.shadowed, key)) e.store.log.warn({ path: key, reason }, 'memory not materialised; never synced from this folder');
      shadowed[key] = e.state.shadowed[key] ?? { reason };
    };
    for (const m of listed) {
      const check = remotePathToRel(m.path);
      if (!check.ok) keepShadow(m.path, check.reason);
      else if (Object.hasOwn(e.state.shadowed, check.rel)) keepShadow(check.rel, e.state.shadowed[check.rel]!.reason);
      else byRel.set(check.rel, m);
    }
    if (e.store.caseInsensitive) {
      // Baseline paths are what the folder holds: they win against newcomers of another case.
      const known = [...byRel.keys()].filter((p) => Object.hasOwn(e.state.baseline, p));
      const fresh = [...byRel.keys()].filter((p) => !Object.hasOwn(e.state.baseline, p));
      const groups = groupCaseCollisions([...known, ...fresh]);
      const keptKnown = new Set(groupCaseCollisions(known).kept);
      for (const s of groups.shadowed) {
        if (keptKnown.has(s.path)) continue;
        keepShadow(s.path, s.reason);
        byRel.delete(s.path);
      }
    }
    e.state = { ...e.state, shadowed };
    const remote = new Map<string, RemoteEntry>();
    for (const [rel, m] of byRel) remote.set(rel, { id: m.id, sha: m.sha });
    return { remote, byRel };
  }

  /** One warning per skipped entry (store in the logger, path, kind, fix); the rest of the store syncs. */
  #warnSkipped(e: StoreEntry, scan: LocalScan): void {
    for (const s of scan.skipped) {
      if (s.kind === 'vanished') continue; // changed under the scan: the next sync sees it settled
      const key = `${s.kind}:${s.rel}`;
      if (e.store.warnedSkips.has(key)) continue;
      e.store.warnedSkips.add(key);
      const where = s.rel === '' ? e.store.root : `${e.store.root}/${s.rel}`;
      e.store.log.warn(
        { path: s.rel, kind: s.kind, ...(s.code ? { code: s.code } : {}), fix: skipFix(s.kind, where) },
        'skipped (not a regular file, or unreadable): never synced and never taken for a deletion',
      );
    }
  }

  #isDisposed(): boolean {
    return this.#disposed || this.#mounted.disposed;
  }

  async #finish(opts: { clean: boolean; signal?: AbortSignal; keepIfIncomplete?: boolean }): Promise<FinishReport> {
    const started = this.#clock.now();
    if (this.#trailing) clearTimeout(this.#trailing);
    this.#trailing = undefined;
    const bound = combineSignals([opts.signal], this.#finalFlushMs);
    const onBound = (): void => this.#runningCtrl?.abort(bound.signal.reason);
    bound.signal.addEventListener('abort', onBound, { once: true });
    let final: SyncReport | undefined;
    let flush = emptyReport();
    let phase: 'final' | 'flush' = opts.clean ? 'final' : 'flush';
    try {
      if (this.#running) await raceAbort(this.#running.catch(() => undefined), bound.signal);
      if (opts.clean && !bound.signal.aborted) {
        final = await this.#startSync(bound.signal, 'final').catch(() => undefined);
      }
      if (!bound.signal.aborted) {
        phase = 'flush';
        flush = await this.#startSync(bound.signal, 'flush').catch(() => emptyReport());
      }
    } finally {
      bound.signal.removeEventListener('abort', onBound);
    }
    const cutOff = bound.signal.aborted;
    bound.dispose();
    // Let an aborted sync unwind (its requests are cancelled) before the folders go away.
    if (this.#running) await raceAbort(this.#running.catch(() => undefined), AbortSignal.timeout(2_000)).catch(() => {});

    // Whatever differs from the store (cut off, failed, skipped by the flush because the store
    // changed too, refused, unreadable) is about to be removed with the folder: copy it out first.
    // A folder holding a file that could not be copied is kept.
    const unsaved = await this.#unsavedPaths();
    const notSaved = unsaved.filter((u) => u.upload).map((u) => `${u.e.store.root}/${u.rel}`);
    const { copies, uncopied, keep } = await this.#keepCopies(unsaved);
    const keptAt = copies.length > 0 ? `; copies kept at ${copies.join(', ')}` : '';
    if (cutOff) {
      safeEmit(this, this.#log, 'flushCutOff', { phase, boundMs: this.#finalFlushMs, pendingUploads: notSaved.length });
      this.#log.warn(
        { bound_ms: this.#finalFlushMs, phase, not_saved: notSaved, copies },
        `final memory sync cut off after ${this.#finalFlushMs} ms; ${notSaved.length} local change(s) did not reach the store${keptAt}`,
      );
    } else if (unsaved.length > 0) {
      this.#log.warn(
        { not_saved: notSaved, unsaved: unsaved.map((u) => `${u.e.store.root}/${u.rel}`), copies },
        `${unsaved.length} file(s) differ from the store at the end (${notSaved.length} not uploaded, the others refused or never synced)${keptAt}`,
      );
    }

    // Deletions this clean end confirmed but could not send (cut off, failed) go to the next
    // session of the store, which sends them first; nothing promised is dropped.
    if (opts.clean && this.#finalDeletes === 'all') await this.#carryPendingDeletes();

    this.#disposed = true;
    // A sync that outlived the unwind wait above can no longer write, create or remove anything.
    for (const e of this.#entries) e.store.dir.dispose();
    if (opts.keepIfIncomplete && (cutOff || notSaved.length > 0 || (final?.errors ?? 1) > 0)) {
      for (const e of this.#entries) if (!keep.has(e.store.root)) keep.set(e.store.root, 'the store could not be reached for all of it; kept for a later attempt');
    }
    const { removed, kept } = await this.#mounted.unmount({ keep });
    return {
      ...(final ? { final } : {}),
      flush,
      cutOff,
      pendingUploads: notSaved.length,
      unsavedCopies: copies,
      uncopied,
      durationMs: this.#clock.now() - started,
      removed,
      kept,
    };
  }

  async #carryPendingDeletes(): Promise<void> {
    if (this.#deletions !== 'enabled') return;
    for (const e of this.#entries) {
      if (e.store.access !== 'read_write') continue;
      // At a clean end every synced file still gone is a confirmed deletion (the final sync waives
      // the wait); one the final sync sent is out of the baseline already. Anything that is there
      // in any form (a FIFO, an unreadable entry) is not gone. A folder emptied whole is a wipe,
      // never a mass deletion.
      const carried: Record<string, { id: string; sha: string }> = {};
      const baseline = Object.entries(e.state.baseline);
      for (const [rel, base] of baseline) {
        if (Object.hasOwn(e.state.refused, rel)) continue;
        const gone = await e.store.dir.lstat(rel).then((st) => st === undefined, () => false);
        if (gone) carried[rel] = { id: base.id, sha: base.sha };
      }
      const wiped = baseline.length > 1 && Object.keys(carried).length === baseline.length;
      if (Object.keys(carried).length === 0 || wiped) continue;
      try {
        await e.store.carryDeletes(carried);
        e.store.log.warn(
          { paths: Object.keys(carried) },
          `${Object.keys(carried).length} local deletion(s) not sent before the end; the next session of this store sends them first`,
        );
      } catch (err) {
        e.store.log.warn({ paths: Object.keys(carried), error: errorSummary(coerceError(err)) }, 'could not record the deletions not sent; the memories stay in the store');
      }
    }
  }

  /**
   * Every file that differs from the store: changed or new regular files (uploads left undone, and
   * versions refused or never synced, read-only stores included), files that cannot be synced
   * (binary, oversized), our reserved temp names, and entries that could not be read at all
   * (`copyable: false`). Reads only changed files. When a folder cannot be scanned, the uploads its
   * last sync planned but did not do are reported instead.
   */
  async #unsavedPaths(): Promise<Unsaved[]> {
    const out: Unsaved[] = [];
    for (const e of this.#entries) {
      const writable = e.store.access === 'read_write';
      try {
        const scan = await scanLocal(e.store.dir, e.store.cache, { exclude: new Set(Object.keys(e.state.shadowed)) });
        for (const [rel, entry] of scan.entries) {
          if (entry.kind === 'file' && e.state.baseline[rel]?.sha === entry.sha) continue;
          const upload = writable && entry.kind === 'file' && !isSettledRefusal(e.state, rel, entry.sha);
          out.push({ e, rel, upload, copyable: true });
        }
        for (const rel of scan.reserved) out.push({ e, rel, upload: false, copyable: true });
        for (const s of scan.skipped) {
          if (s.kind === 'unreadable' || s.kind === 'too-long' || s.kind === 'too-deep') out.push({ e, rel: s.rel, upload: false, copyable: false });
        }
      } catch {
        out.push(...e.notSaved.map((rel) => ({ e, rel, upload: true, copyable: true })));
      }
    }
    return out.sort((a, b) => (`${a.e.store.root}/${a.rel}` < `${b.e.store.root}/${b.rel}` ? -1 : 1));
  }

  /**
   * Copy each unsaved file out of its mount (`<stateDir>/unsaved/<store>/<stamp>/<path>`). A file
   * that cannot be copied keeps its folder in place (`keep`), with a warning naming it.
   */
  async #keepCopies(unsaved: Unsaved[]): Promise<{ copies: string[]; uncopied: string[]; keep: Map<string, string> }> {
    const stamp = conflictStamp();
    const copies: string[] = [];
    const uncopied: string[] = [];
    const keep = new Map<string, string>();
    for (const { e, rel, copyable } of unsaved) {
      const where = `${e.store.root}/${rel}`;
      try {
        if (!copyable) throw new StateFileError('it could not be read', { path: where });
        copies.push(await this.#conflicts.save(e.store.dir, e.store.storeId, rel, stamp, 'unsaved'));
      } catch (err) {
        uncopied.push(where);
        const reason = `${where} differs from the store and could not be copied out (${coerceError(err).message})`;
        if (!keep.has(e.store.root)) keep.set(e.store.root, reason);
        e.store.log.warn(
          { path: rel, error: errorSummary(coerceError(err)) },
          `could not keep a copy of ${where}; the folder ${e.store.root} is left in place so it is not lost. Save it, then remove the folder by hand`,
        );
      }
    }
    return { copies, uncopied, keep };
  }
}

function changedSomething(r: SyncReport): boolean {
  return r.uploads + r.downloads + r.conflicts + r.deletes + r.localDeletes + r.wouldDeletes + r.refusals > 0;
}

function skippedTest(scan: LocalScan): (path: string) => boolean {
  const set = new Set(scan.skipped.map((s) => s.rel));
  return (p) => isUnderSkipped(p, set);
}

function skipFix(kind: SkippedEntry['kind'], where: string): string {
  switch (kind) {
    case 'symlink':
    case 'fifo':
    case 'socket':
    case 'device':
      return `replace ${where} with a regular file (or remove it) to sync it`;
    case 'unreadable':
      return `make ${where} readable by the worker's user (chmod u+rX)`;
    case 'too-long':
      return `shorten the path of ${where} (it is longer than this system allows)`;
    case 'too-deep':
      return `move ${where} closer to the store root: a memory path has at most 20 segments`;
    case 'unreadable-name':
      return `rename ${where} to a valid UTF-8 name`;
    case 'vanished':
      return 'none: it changed during the scan';
    default:
      return kind satisfies never;
  }
}

function hasLocalChanges(state: StoreSyncState, scan: LocalScan): boolean {
  for (const [rel, entry] of scan.entries) {
    if (entry.kind !== 'file') continue;
    if (state.baseline[rel]?.sha === entry.sha) continue;
    if (isSettledRefusal(state, rel, entry.sha)) continue;
    return true;
  }
  return false;
}

/**
 * True when this version of `rel` was refused for a reason that holds until the file changes
 * (binary, too large, read-only…). A path-conflict refusal does not count: it ends when the
 * overlapping memory is deleted, so the file is still a local change waiting to be saved.
 */
function isSettledRefusal(state: StoreSyncState, rel: string, sha: string): boolean {
  const refused = state.refused[rel];
  return refused !== undefined && refused.fingerprint === sha && !isPathConflictReason(refused.reason);
}

/**
 * Drop the path-conflict refusals whose overlapping memory is no longer listed (no listed path is
 * an ancestor or a descendant of the refused one), so the planner uploads the file again. Without
 * this, a folder the agent put in place of a file (or the reverse) would stay refused after the
 * sync deleted the old memory, and never reach the store.
 */
export function releaseResolvedPathConflicts(state: StoreSyncState, remote: ReadonlyMap<string, unknown>): StoreSyncState {
  const conflicts = Object.entries(state.refused).filter(([, r]) => isPathConflictReason(r.reason));
  if (conflicts.length === 0) return state;
  const folders = new Set<string>();
  for (const rel of remote.keys()) {
    for (let i = rel.indexOf('/'); i !== -1; i = rel.indexOf('/', i + 1)) folders.add(rel.slice(0, i));
  }
  const overlaps = (rel: string): boolean => {
    if (folders.has(rel)) return true;
    for (let i = rel.indexOf('/'); i !== -1; i = rel.indexOf('/', i + 1)) if (remote.has(rel.slice(0, i))) return true;
    return false;
  };
  let refused = state.refused;
  for (const [rel] of conflicts) {
    if (overlaps(rel)) continue;
    if (refused === state.refused) refused = { ...state.refused };
    delete refused[rel];
  }
  return refused === state.refused ? state : { ...state, refused };
}

function addReport(into: SyncReport, r: SyncReport): void {
  into.uploads += r.uploads;
  into.downloads += r.downloads;
  into.conflicts += r.conflicts;
  into.deletes += r.deletes;
  into.localDeletes += r.localDeletes;
  into.wouldDeletes += r.wouldDeletes;
  into.refusals += r.refusals;
  into.errors += r.errors;
  into.skippedStores += r.skippedStores;
}

function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const onAbort = (): void => resolve(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve(undefined);
      },
    );
  });
}
