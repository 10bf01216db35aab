import type { EventEmitter } from 'node:events';
import * as fsp from 'node:fs/promises';
import type Anthropic from '@anthropic-ai/sdk';
import { coerceError } from '../errors.js';
import { isAbortError } from '../internal/abort.js';
import type { Clock } from '../internal/clock.js';
import { errorSummary, snakeCaseKeys } from '../internal/logger.js';
import { safeEmit } from '../internal/safe-emit.js';
import type { ConflictCopies } from './conflict-copies.js';
import { emptyReport, executePlan } from './executor.js';
import { MARKER_CHANGED_DURING_SYNC, folderVerdict, markerProblemWarning, markerVerdict, type FolderFacts, type MarkerRead } from './folder-verdict.js';
import { isUnderSkipped, scanLocal, type LocalScan } from './local-scan.js';
import { MARKER_FILE_NAME, markerContent } from './marker.js';
import type { MountedStore } from './mounted.js';
import { isRemoteWrite, planSync, type SyncPhase } from './plan.js';
import { RemoteStore } from './remote-store.js';
import { cloneSyncState, completeGeneration } from './sync-state.js';
import { addReport, changedSomething, hasLocalChanges, releaseResolvedPathConflicts, remoteView, skipFix, warnsSkip } from './sync-rules.js';
import type { MemoryDeleteMode, MemoryEventMap, StoreSyncState, SyncReport } from './types.js';

/** What every store's pass shares with the loop that runs it. */
export interface StorePassContext {
  clock: Clock;
  deletions: MemoryDeleteMode;
  deleteAfterMs: number;
  finalDeletes: 'all' | 'corroborated';
  concurrency: number;
  conflicts: ConflictCopies;
  /** True once the loop finished or the mount is gone: nothing is touched after that. */
  disposed: () => boolean;
  /** Where the store's events go (listener failures are logged, never thrown). */
  emitter: EventEmitter<MemoryEventMap>;
}

/**
 * One store's sync: check the folder and its marker, scan the folder beside the listing, plan,
 * execute, and commit the state to the mount (which rewrites the journal entry when it changed).
 * One failed pass never throws: it is counted in `errors` and retried next sync.
 */
export class StorePass {
  readonly store: MountedStore;
  readonly #remote: RemoteStore;
  readonly #ctx: StorePassContext;
  #state: StoreSyncState;
  /** Last marker problem warned about, so a skipped store is not warned every sync. */
  #markerWarned: string | undefined;
  #notSaved: string[] = [];

  constructor(store: MountedStore, client: Anthropic, ctx: StorePassContext, requestTimeoutMs: number | undefined) {
    this.store = store;
    this.#ctx = ctx;
    this.#remote = new RemoteStore(client, store.storeId, { requestTimeoutMs });
    this.#state = cloneSyncState(store.state);
  }

  /** The store's sync state as the last pass left it. */
  get state(): StoreSyncState {
    return this.#state;
  }

  /** Uploads the last pass planned but did not do (what a failed final scan reports instead). */
  get notSaved(): readonly string[] {
    return this.#notSaved;
  }

  async run(phase: SyncPhase, signal: AbortSignal, stamp: string): Promise<SyncReport> {
    const ctx = this.#ctx;
    const started = ctx.clock.now();
    const report = emptyReport();
    const log = this.store.log;
    this.#notSaved = [];
    try {
      if (ctx.disposed()) return report;
      const ready = await this.#checkFolder(phase);
      if (ready === 'skip') {
        report.skippedStores++;
        return report;
      }
      if (ready === 'rebuilt') {
        // Folder wiped with its marker: start over as after a fresh mount, so every memory is
        // downloaded again and nothing is deleted in the store, whatever the baseline's size.
        this.#state = { ...this.#state, baseline: {}, pendingDeletes: {}, refused: {} };
      }
      // The listing does not depend on the scan, so both run at once (a flush lists only when
      // the scan found local changes).
      const listing = phase === 'flush' ? undefined : this.#remote.listBasic(signal);
      listing?.catch(() => {});
      const scan = await scanLocal(this.store.dir, this.store.cache, {
        exclude: new Set(Object.keys(this.#state.shadowed)),
        concurrency: ctx.concurrency,
      });
      log.debug({ phase, files: scan.entries.size, files_read: scan.filesRead }, 'local scan done');
      this.#warnSkipped(scan);
      if (phase === 'flush' && !hasLocalChanges(this.#state, scan.entries)) return report;
      if (signal.aborted) throw coerceError(signal.reason);

      const listed = await (listing ?? this.#remote.listBasic(signal));
      const view = remoteView(listed, this.#state, this.store.caseInsensitive);
      for (const s of view.newlyShadowed) log.warn({ path: s.path, reason: s.reason }, 'memory not materialised; never synced from this folder');
      this.#state = releaseResolvedPathConflicts({ ...this.#state, shadowed: view.shadowed }, view.remote);
      const plan = planSync({
        state: this.#state,
        local: scan.entries,
        remote: view.remote,
        deletions: ctx.deletions,
        phase,
        nowMs: ctx.clock.now(),
        deleteAfterMs: ctx.deleteAfterMs,
        finalDeletes: ctx.finalDeletes,
        skipped: skippedTest(scan),
      });
      if (plan.wiped) log.warn('the folder was emptied; downloading the store again instead of deleting its memories');
      if (plan.actions.some(isRemoteWrite) && !(await this.#markerStillOurs())) {
        // The marker went away between the scan and the uploads: push and delete nothing.
        this.#markerProblem(MARKER_CHANGED_DURING_SYNC);
        report.skippedStores++;
        return report;
      }
      const result = await executePlan(
        {
          storeId: this.store.storeId,
          dir: this.store.dir,
          cache: this.store.cache,
          remote: this.#remote,
          log,
          conflicts: ctx.conflicts,
          stamp,
          scan,
          listed: view.byRel,
          concurrency: ctx.concurrency,
          signal,
          disposed: ctx.disposed,
          emit: (event, ...args) => safeEmit(ctx.emitter, log, event, ...args),
          lastPass: phase !== 'sync',
        },
        this.#state,
        plan,
      );
      this.#state = result.state;
      this.#notSaved = result.notSaved;
      addReport(report, result.report);
      if (!signal.aborted) this.#state = completeGeneration(this.#state, phase);
    } catch (err) {
      if (signal.aborted || isAbortError(err) || ctx.disposed()) {
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
    await this.store.commit(this.#state);
    report.durationMs = ctx.clock.now() - started;
    if (changedSomething(report)) log.info({ phase, ...snakeCaseKeys(report) }, 'memory sync changed this store');
    safeEmit(ctx.emitter, log, 'synced', { storeId: this.store.storeId, report: { ...report }, phase });
    return report;
  }

  /** Observe the folder and its marker, then act on the pure verdict (re-create, skip, go on). */
  async #checkFolder(phase: SyncPhase): Promise<'ok' | 'rebuilt' | 'skip'> {
    const { dir, log } = this.store;
    const verdict = folderVerdict(await this.#folderFacts(), dir.root, phase);
    switch (verdict.action) {
      case 'sync':
        this.#markerWarned = undefined;
        return 'ok';
      case 'skip':
        if (verdict.problem !== undefined) this.#markerProblem(verdict.problem);
        return 'skip';
      case 'rebuild':
        if (verdict.createRoot) await dir.createRoot();
        await dir.writeMarker(markerContent(this.store.storeId));
        log.warn({ root: dir.root }, verdict.warning);
        return 'rebuilt';
      default:
        return verdict satisfies never;
    }
  }

  /** What is at the mount path; the marker's type and the folder's emptiness only when the marker is not ours. */
  async #folderFacts(): Promise<FolderFacts> {
    const { dir } = this.store;
    if (!(await dir.rootExists())) {
      const st = await fsp.lstat(dir.root).catch(() => undefined);
      return { root: st === undefined ? 'missing' : 'not-a-folder' };
    }
    const bytes = await dir.readMarker();
    const read: MarkerRead = bytes !== undefined ? { kind: 'bytes', bytes } : { kind: 'missing' };
    const marker = markerVerdict(read, this.store.storeId);
    if (marker.kind === 'ours') return { root: 'folder', marker, empty: false };
    const markerStat = await dir.lstat(MARKER_FILE_NAME);
    if (markerStat !== undefined && !markerStat.isFile()) return { root: 'folder', marker: { kind: 'not-a-file' }, empty: false };
    return { root: 'folder', marker, empty: await dir.isEmpty() };
  }

  async #markerStillOurs(): Promise<boolean> {
    const bytes = await this.store.dir.readMarker().catch(() => undefined);
    const read: MarkerRead = bytes !== undefined ? { kind: 'bytes', bytes } : { kind: 'missing' };
    return markerVerdict(read, this.store.storeId).kind === 'ours';
  }

  #markerProblem(problem: string): void {
    if (this.#markerWarned === problem) return;
    this.#markerWarned = problem;
    this.store.log.warn({ root: this.store.root }, markerProblemWarning(problem, this.store.storeId));
  }

  /** One warning per skipped entry (store in the logger, path, kind, fix); the rest of the store syncs. */
  #warnSkipped(scan: LocalScan): void {
    for (const s of scan.skipped) {
      if (!warnsSkip(s.kind)) continue;
      const key = `${s.kind}:${s.rel}`;
      if (this.store.warnedSkips.has(key)) continue;
      this.store.warnedSkips.add(key);
      const where = s.rel === '' ? this.store.root : `${this.store.root}/${s.rel}`;
      this.store.log.warn(
        { path: s.rel, kind: s.kind, ...(s.code ? { code: s.code } : {}), fix: skipFix(s.kind, where) },
        'skipped (not a regular file, or unreadable): never synced and never taken for a deletion',
      );
    }
  }
}

function skippedTest(scan: LocalScan): (path: string) => boolean {
  const set = new Set(scan.skipped.map((s) => s.rel));
  return (p) => isUnderSkipped(p, set);
}
