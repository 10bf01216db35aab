import { EventEmitter } from 'node:events';
import type Anthropic from '@anthropic-ai/sdk';
import { monotonicClock, type Clock } from '../../internal/clock.js';
import { childLogger, resolveLogger, snakeCaseKeys, type Logger } from '../../internal/logger.js';
import { safeEmit } from '../../internal/safe-emit.js';
import { ConflictCopies, conflictStamp } from '../disk/conflict-copies.js';
import { addReport, emptyReport } from '../rules/sync-report.js';
import { CONTENT_CACHE_DEFAULT_BYTES, ContentCache } from '../disk/content-cache.js';
import type { MountedSession } from './mounted.js';
import type { SyncPhase } from '../rules/plan.js';
import { defaultStateDir } from '../disk/state-dir.js';
import { StorePass } from './store-pass.js';
import { finishSession, type FinishReport } from './sync-finish.js';
import { cloneSyncState } from '../rules/sync-state.js';
import { SyncScheduler } from './sync-scheduler.js';
import type { MemoryDeleteMode, MemoryEventMap, StoreSyncState, SyncReport } from '../rules/types.js';

export { FINAL_FLUSH_DEFAULT_MS } from './options.js';
export type { FinishReport } from './sync-finish.js';
import {
  FINAL_FLUSH_DEFAULT_MS,
  MEMORY_DELETE_AFTER_DEFAULT_MS,
  MEMORY_SYNC_INTERVAL_DEFAULT_MS,
  checkMemoryOptions,
  memoryConcurrency,
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
  /**
   * Bytes of the content cache in the state folder pulls read and fill (see `ContentCache`).
   * Default 536 870 912 (512 MiB); `0` turns it off.
   */
  contentCacheBytes?: number;
}

/** Runs one sync pass of `phase` given as `run`, and returns its report. */
export type SyncWrapper = (phase: SyncPhase, run: () => Promise<SyncReport>) => Promise<SyncReport>;

/**
 * Keeps mounted folders and their stores in step (the rules: docs/design.md).
 *
 * Rules:
 * - at most one sync runs at a time; `afterToolCall` starts one when the interval has passed since
 *   the last one started, else arms a single trailing sync for when it has, so an edit made in the
 *   last tool call of a turn reaches the store within one interval;
 * - `beforeToolCall` runs a due sync first (or waits for the running one), so the agent does not
 *   read a memory already known to be stale;
 * - `sessionIdle` (the turn ended) uploads the changed files at once, push-only, bounded by
 *   `finalFlushMs`; it does not move the next sync;
 * - after `callStopped` (a tool call was stopped or timed out), the files the next scan finds
 *   missing are put back from the store while they stay missing, never deleted there;
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
  readonly #passes: StorePass[];
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #scheduler: SyncScheduler;
  readonly #deletions: MemoryDeleteMode;
  readonly #finalFlushMs: number;
  readonly #finalDeletes: 'all' | 'corroborated';
  readonly #conflicts: ConflictCopies;
  #finishing: Promise<FinishReport> | undefined;
  #disposed = false;

  constructor(opts: SyncLoopOptions) {
    super();
    const intervalMs = opts.intervalMs ?? MEMORY_SYNC_INTERVAL_DEFAULT_MS;
    const finalFlushMs = opts.finalFlushMs ?? FINAL_FLUSH_DEFAULT_MS;
    checkMemoryOptions(
      {
        memorySyncIntervalMs: intervalMs,
        finalFlushMs,
        ...(opts.deleteAfterMs !== undefined ? { memoryDeleteAfterMs: opts.deleteAfterMs } : {}),
        ...(opts.contentCacheBytes !== undefined ? { memoryCacheBytes: opts.contentCacheBytes } : {}),
      },
      'SyncLoop options',
    );
    this.#mounted = opts.mounted;
    this.#finalFlushMs = finalFlushMs;
    this.#deletions = opts.deletions ?? 'enabled';
    this.#finalDeletes = opts.finalDeletes ?? 'all';
    this.#clock = opts.clock ?? monotonicClock;
    this.#log = childLogger(resolveLogger(opts.logger), { component: 'memory-sync', session_id: opts.mounted.sessionId });
    this.#conflicts = new ConflictCopies(opts.stateDir ?? defaultStateDir());
    const wrapSync: SyncWrapper = opts.wrapSync ?? ((_phase, run) => run());
    const passContext = {
      clock: this.#clock,
      deletions: this.#deletions,
      deleteAfterMs: opts.deleteAfterMs ?? MEMORY_DELETE_AFTER_DEFAULT_MS,
      finalDeletes: this.#finalDeletes,
      concurrency: memoryConcurrency(opts.concurrency),
      conflicts: this.#conflicts,
      emitter: this,
      disposed: () => this.#isDisposed(),
      contents: ContentCache.shared({
        stateDir: opts.stateDir ?? defaultStateDir(),
        maxBytes: opts.contentCacheBytes ?? CONTENT_CACHE_DEFAULT_BYTES,
        logger: this.#log,
      }),
    };
    this.#passes = opts.mounted.stores.map((store) => new StorePass(store, opts.client, passContext, opts.requestTimeoutMs));
    this.#scheduler = new SyncScheduler({
      clock: this.#clock,
      intervalMs,
      log: this.#log,
      closed: () => this.#closed(),
      run: (phase, signal) => wrapSync(phase, () => this.#syncAll(phase, signal)),
      pushBoundMs: finalFlushMs,
      push: async (signal) => {
        try {
          return await wrapSync('flush', () => this.#syncAll('flush', signal));
        } finally {
          // What such a push scanned is stale by the end of the session: only the finish's own
          // flush may hand its scan to the check for unsaved files.
          for (const pass of this.#passes) pass.takeSettledScan();
        }
      },
    });
  }

  /**
   * Call right before a tool runs, and pair it with {@link afterToolCall} once the tool is done
   * (in a `finally`): between the two, no trailing sync starts, so a sync never scans a file the
   * tool is half-way through writing.
   */
  beforeToolCall(): Promise<void> {
    return this.#scheduler.beforeToolCall();
  }

  afterToolCall(): void {
    this.#scheduler.afterToolCall();
  }

  /**
   * A tool call was stopped or timed out (call it before that call's {@link afterToolCall}): it may
   * have moved memory files away half-way, so every file of a store the next scan finds missing is
   * put back from the store while it stays missing, never deleted there. Never throws.
   */
  callStopped(): void {
    const atMs = this.#clock.now();
    for (const pass of this.#passes) pass.callStopped(atMs);
  }

  /**
   * The session went idle (the agent's turn ended): the files changed since the last sync go up
   * now, in a push-only pass bounded by `finalFlushMs`, instead of with the next sync. Never throws.
   */
  sessionIdle(): void {
    this.#scheduler.sessionIdle();
  }

  /**
   * Reconcile every store now (after the running sync, if any). Resolves with the counts; rejects
   * only when `signal` aborts. After `finish`, resolves with an empty report and touches nothing.
   */
  syncNow(opts: { signal?: AbortSignal } = {}): Promise<SyncReport> {
    return this.#scheduler.syncNow(opts.signal);
  }

  /**
   * End the session: final sync (clean end), flush, copies of what differs, unmount.
   * `keepIfIncomplete`: when the store could not be reached or the bound cut the end off, keep the
   * folders (handed back in the journal) instead of removing them, so a later attempt uploads what
   * is there (recovery uses it). @internal
   */
  finish(opts: { clean: boolean; signal?: AbortSignal; keepIfIncomplete?: boolean }): Promise<FinishReport> {
    this.#finishing ??= finishSession(
      {
        scheduler: this.#scheduler,
        passes: this.#passes,
        mounted: this.#mounted,
        emitter: this,
        log: this.#log,
        clock: this.#clock,
        finalFlushMs: this.#finalFlushMs,
        deletions: this.#deletions,
        finalDeletes: this.#finalDeletes,
        conflicts: this.#conflicts,
        dispose: () => {
          this.#disposed = true;
        },
      },
      opts,
    );
    return this.#finishing;
  }

  snapshot(): StoreSyncState[] {
    return this.#passes.map((p) => cloneSyncState(p.state));
  }

  #closed(): boolean {
    return this.#disposed || this.#finishing !== undefined || this.#mounted.disposed;
  }

  #isDisposed(): boolean {
    return this.#disposed || this.#mounted.disposed;
  }

  /** One pass over every store, in parallel; one failed store never fails the others. */
  async #syncAll(phase: SyncPhase, signal: AbortSignal): Promise<SyncReport> {
    const started = this.#clock.now();
    const stamp = conflictStamp();
    const reports = await Promise.all(this.#passes.map((p) => p.run(phase, signal, stamp)));
    const total = emptyReport();
    for (const r of reports) addReport(total, r);
    total.durationMs = this.#clock.now() - started;
    const level = total.errors > 0 ? 'warn' : 'debug';
    this.#log[level]({ phase, ...snakeCaseKeys(total) }, 'memory sync done');
    safeEmit(this, this.#log, 'synced', { storeId: undefined, report: total, phase });
    return total;
  }
}
