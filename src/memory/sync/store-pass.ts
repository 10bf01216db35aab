import type { EventEmitter } from 'node:events';
import * as fsp from 'node:fs/promises';
import type Anthropic from '@anthropic-ai/sdk';
import { coerceError } from '../../errors.js';
import { isAbortError } from '../../internal/abort.js';
import type { Clock } from '../../internal/clock.js';
import { errorSummary, snakeCaseKeys } from '../../internal/logger.js';
import { safeEmit } from '../../internal/safe-emit.js';
import type { ConflictCopies } from '../disk/conflict-copies.js';
import { executeAction, executePlan, type ExecuteContext } from './executor.js';
import { addReport, changedSomething, emptyReport } from '../rules/sync-report.js';
import { earlyUploadIndex } from '../rules/early-upload-rule.js';
import type { ContentCache } from '../disk/content-cache.js';
import { EarlyUploads } from './early-uploads.js';
import { folderVerdict, type FolderFacts } from '../rules/folder-verdict.js';
import { scanLocal } from '../disk/local-scan.js';
import { isUnderSkipped, type LocalScan } from '../rules/scan.js';
import {
  MARKER_CHANGED_DURING_SYNC,
  MARKER_FILE_NAME,
  markerContent,
  markerProblemWarning,
  markerVerdict,
  type MarkerVerdict,
} from '../rules/marker.js';
import type { MountedStore } from './mounted.js';
import { isRemoteWrite, planSync, type LocalEntry, type SyncPhase } from '../rules/plan.js';
import { RemoteStore, type RemoteMemory } from '../remote/remote-store.js';
import { applyOutcomes, completeGeneration } from '../rules/sync-state.js';
import { restoreMarksAfterScan } from '../rules/restore-rule.js';
import { hasLocalChanges, releaseResolvedPathConflicts, remoteView, skipFix, warnsSkip } from '../rules/sync-rules.js';
import type { MemoryDeleteMode, MemoryEventMap, StoreSyncState, SyncReport } from '../rules/types.js';

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
  /** The content cache pulls read and fill; none when it is off. */
  contents?: ContentCache | undefined;
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
  #settledScan: LocalScan | undefined;
  /** When the latest tool call was stopped or timed out, until a scan has looked at its effect. */
  #stoppedAtMs: number | undefined;

  constructor(store: MountedStore, client: Anthropic, ctx: StorePassContext, requestTimeoutMs: number | undefined) {
    this.store = store;
    this.#ctx = ctx;
    this.#remote = new RemoteStore(client, store.storeId, { requestTimeoutMs });
    // A state is never changed in place (each transition copies what it changes), so the passes
    // start from the mounted state itself: no copy of a large store on the way to the first tool call.
    this.#state = store.state;
  }

  /** The store's sync state as the last pass left it. */
  get state(): StoreSyncState {
    return this.#state;
  }

  /** Uploads the last pass planned but did not do (what a failed final scan reports instead). */
  get notSaved(): readonly string[] {
    return this.#notSaved;
  }

  /**
   * The scan of the last pass when it was a flush that found nothing to upload: the folder as it
   * stands against {@link state} (without file contents), for the end-of-session check to use
   * instead of scanning again. Handed out once.
   */
  takeSettledScan(): LocalScan | undefined {
    const scan = this.#settledScan;
    this.#settledScan = undefined;
    return scan;
  }

  /**
   * A tool call was stopped or timed out at `atMs` (monotonic): the next scan that starts after it
   * marks every file of the store the folder lacks, to be put back rather than deleted (the rules:
   * `rules/restore-rule.ts`).
   */
  callStopped(atMs: number): void {
    this.#stoppedAtMs = Math.max(this.#stoppedAtMs ?? atMs, atMs);
  }

  async run(phase: SyncPhase, signal: AbortSignal, stamp: string): Promise<SyncReport> {
    const ctx = this.#ctx;
    const started = ctx.clock.now();
    const report = emptyReport();
    const log = this.store.log;
    this.#notSaved = [];
    this.#settledScan = undefined;
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
      // In the final sync, new files go up while the scan runs, as soon as the listing shows
      // nothing they could clash with.
      const early = listing !== undefined && phase === 'final' ? this.#earlyUploads(listing, phase, signal, stamp) : undefined;
      const scanStartedMs = ctx.clock.now();
      const scan = await scanLocal(this.store.dir, this.store.cache, {
        exclude: new Set(Object.keys(this.#state.shadowed)),
        ...(early !== undefined
          ? { onFile: (rel: string, entry: LocalEntry, bytes: Buffer | undefined) => early.offer(rel, entry, bytes) }
          : {}),
      });
      const earlyDone = await early?.settle();
      if (earlyDone !== undefined) {
        this.#state = applyOutcomes(this.#state, earlyDone.steps);
        addReport(report, earlyDone.report);
        this.#notSaved = earlyDone.notSaved;
      }
      log.debug(
        { phase, files: scan.entries.size, files_read: scan.filesRead, uploaded_early: earlyDone?.created.size ?? 0 },
        'local scan done',
      );
      this.#warnSkipped(scan);
      this.#markMovedAway(scan, scanStartedMs);
      if (phase === 'flush' && !hasLocalChanges(this.#state, scan.entries)) {
        // Kept without the bytes it read: nothing is uploaded from it.
        this.#settledScan = { ...scan, contents: new Map() };
        return report;
      }
      if (signal.aborted) throw coerceError(signal.reason);

      const listed = await (listing ?? this.#remote.listBasic(signal));
      const view = remoteView(listed, this.#state, this.store.caseInsensitive);
      // The listing was taken before the early uploads: what they created is in the store now.
      for (const [rel, entry] of earlyDone?.created ?? []) view.remote.set(rel, entry);
      for (const s of view.newlyShadowed)
        log.warn({ path: s.path, reason: s.reason }, 'memory not materialised; never synced from this folder');
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
      // A path uploaded early had its one attempt of this pass; its outcome is in the state already.
      const rest = earlyDone === undefined ? plan : { ...plan, actions: plan.actions.filter((a) => !earlyDone.attempted.has(a.path)) };
      const result = await executePlan(this.#executeContext({ scan, listed: view.byRel, signal, stamp, phase }), this.#state, rest);
      this.#state = result.state;
      this.#notSaved = [...this.#notSaved, ...result.notSaved].sort();
      addReport(report, result.report);
      if (!signal.aborted) this.#state = completeGeneration(this.#state, phase);
    } catch (err) {
      if (signal.aborted || isAbortError(err) || ctx.disposed()) {
        log.debug({ phase }, 'memory sync aborted (or outlived the unmount)');
      } else {
        report.errors++;
        log.warn(
          { error: errorSummary(coerceError(err)), phase },
          phase === 'sync'
            ? 'memory sync of this store failed; retried next sync'
            : 'memory sync of this store failed at the end; what differs is copied out',
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

  #executeContext(p: {
    scan: LocalScan;
    listed: ReadonlyMap<string, RemoteMemory>;
    signal: AbortSignal;
    stamp: string;
    phase: SyncPhase;
  }): ExecuteContext {
    const ctx = this.#ctx;
    const log = this.store.log;
    return {
      storeId: this.store.storeId,
      dir: this.store.dir,
      cache: this.store.cache,
      remote: this.#remote,
      log,
      conflicts: ctx.conflicts,
      stamp: p.stamp,
      scan: p.scan,
      listed: p.listed,
      concurrency: ctx.concurrency,
      signal: p.signal,
      disposed: ctx.disposed,
      emit: (event, ...args) => safeEmit(ctx.emitter, log, event, ...args),
      lastPass: p.phase !== 'sync',
      contents: ctx.contents,
    };
  }

  /**
   * The uploads of this pass that start during its scan. They open once the listing is in and the
   * marker is still ours (an upload never leaves a folder whose marker went away); a failed listing
   * opens nothing, and the pass reports it as usual.
   */
  #earlyUploads(listing: Promise<RemoteMemory[]>, phase: SyncPhase, signal: AbortSignal, stamp: string): EarlyUploads {
    const early = new EarlyUploads((action, bytes, report) => {
      const scan: LocalScan = {
        entries: new Map(),
        stats: new Map(),
        skipped: [],
        reserved: [],
        markerPresent: true,
        filesRead: 0,
        contents: new Map(bytes !== undefined ? [[action.path, bytes]] : []),
      };
      return executeAction(this.#executeContext({ scan, listed: new Map(), signal, stamp, phase }), this.#state, action, report);
    }, this.#ctx.concurrency);
    const state = this.#state;
    void listing
      .then(async (listed) => {
        const view = remoteView(listed, state, this.store.caseInsensitive);
        if (!(await this.#markerStillOurs())) return;
        early.open(
          earlyUploadIndex({
            state: { ...state, shadowed: view.shadowed },
            remote: view.remote,
            deletions: this.#ctx.deletions,
            caseInsensitive: this.store.caseInsensitive,
            phase,
          }),
        );
      })
      .catch(() => {});
    return early;
  }

  /** Apply the marks of the files a stopped call may have moved away, as the scan found the folder. */
  #markMovedAway(scan: LocalScan, scanStartedMs: number): void {
    if (this.#stoppedAtMs === undefined && this.#state.restore === undefined) return;
    const reserved = new Set(scan.reserved);
    const skipped = new Set(scan.skipped.map((s) => s.rel));
    const marks = restoreMarksAfterScan({
      state: this.#state,
      seen: (rel) => scan.entries.has(rel) || scan.stats.has(rel) || reserved.has(rel) || isUnderSkipped(rel, skipped),
      stoppedAtMs: this.#stoppedAtMs,
      scanStartedMs,
    });
    // A later stop (while this scan ran) waits for the next scan.
    if (marks.stopApplied && this.#stoppedAtMs !== undefined && this.#stoppedAtMs <= scanStartedMs) this.#stoppedAtMs = undefined;
    const before = this.#state.restore;
    if (marks.restore === before) return;
    const added = Object.keys(marks.restore ?? {}).filter((rel) => before === undefined || !Object.hasOwn(before, rel));
    if (added.length > 0) {
      this.store.log.warn(
        { paths: added.slice(0, 20), count: added.length },
        `${added.length} memory file(s) missing after a tool call was stopped or timed out; they are put back from the store, not deleted`,
      );
    }
    if (marks.restore === undefined) {
      const { restore: _ended, ...rest } = this.#state;
      this.#state = rest;
    } else {
      this.#state = { ...this.#state, restore: marks.restore };
    }
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
    const marker = this.#markerVerdict(await dir.readMarker());
    if (marker.kind === 'ours') return { root: 'folder', marker, empty: false };
    const markerStat = await dir.lstat(MARKER_FILE_NAME);
    if (markerStat !== undefined && !markerStat.isFile()) return { root: 'folder', marker: { kind: 'not-a-file' }, empty: false };
    return { root: 'folder', marker, empty: await dir.isEmpty() };
  }

  async #markerStillOurs(): Promise<boolean> {
    return this.#markerVerdict(await this.store.dir.readMarker().catch(() => undefined)).kind === 'ours';
  }

  /** What the bytes read where the marker goes say about the folder (`undefined`: no marker file there). */
  #markerVerdict(bytes: Uint8Array | undefined): MarkerVerdict {
    return markerVerdict(bytes !== undefined ? { kind: 'bytes', bytes } : { kind: 'missing' }, this.store.storeId);
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
