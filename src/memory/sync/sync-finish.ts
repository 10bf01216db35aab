import type { EventEmitter } from 'node:events';
import pLimit from 'p-limit';
import { coerceError, StateFileError } from '../../errors.js';
import { combineSignals } from '../../internal/abort.js';
import type { Clock } from '../../internal/clock.js';
import { errorSummary, type Logger } from '../../internal/logger.js';
import { safeEmit } from '../../internal/safe-emit.js';
import { conflictStamp, type ConflictCopies } from '../disk/conflict-copies.js';
import { emptyReport } from '../rules/sync-report.js';
import { goneCandidates } from '../rules/gone-paths.js';
import { scanLocal } from '../disk/local-scan.js';
import type { MountedSession } from './mounted.js';
import type { StorePass } from './store-pass.js';
import type { SyncScheduler } from './sync-scheduler.js';
import { carriedDeletes, unsavedInScan, type UnsavedPath } from '../rules/sync-rules.js';
import type { MemoryDeleteMode, MemoryEventMap, SyncReport } from '../rules/types.js';

/**
 * What the end of a session did to its memory: the final sync, the flush, and what was left unsaved.
 * @inline
 */
export interface FinishReport {
  /** The final sync's report (clean end only). */
  final?: SyncReport;
  /** The push-only flush's report. */
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
  /** Milliseconds from the start of the final sync to the end of the unmount. */
  durationMs: number;
  /** Folders the unmount removed. */
  removed: string[];
  /** Folders the unmount kept (their files could not all be saved or copied). */
  kept: string[];
}

export interface FinishOptions {
  clean: boolean;
  signal?: AbortSignal | undefined;
  keepIfIncomplete?: boolean | undefined;
}

/** What the finish works with; the loop hands it over once, when the session ends. */
export interface FinishContext {
  scheduler: SyncScheduler;
  passes: readonly StorePass[];
  mounted: MountedSession;
  emitter: EventEmitter<MemoryEventMap>;
  log: Logger;
  clock: Clock;
  finalFlushMs: number;
  deletions: MemoryDeleteMode;
  finalDeletes: 'all' | 'corroborated';
  conflicts: ConflictCopies;
  /** From now on no sync touches the folders (called right before the unmount). */
  dispose: () => void;
}

/** Files checked at once for being gone at the end. */
const GONE_CHECKS_IN_FLIGHT = 16;

/**
 * Stores scanned at once by the check for unsaved files. The scans run on this thread (the lstats
 * are synchronous), so running them all at once saves no time and holds every store's scan at once.
 */
const UNSAVED_SCANS_IN_FLIGHT = 2;

interface Unsaved extends UnsavedPath {
  pass: StorePass;
}

/**
 * The end of a session, in order:
 * 1. the final sync (clean end) and a push-only flush, both bounded by `finalFlushMs`; when the
 *    bound expires the requests in flight are aborted and `flushCutOff` is emitted;
 * 2. every file that still differs from the store is copied to the state folder (a folder holding
 *    one that cannot be copied is kept);
 * 3. deletions a clean end could not send are handed to the next session of the store;
 * 4. the folders are unmounted, and nothing touches them again.
 */
export async function finishSession(ctx: FinishContext, opts: FinishOptions): Promise<FinishReport> {
  const started = ctx.clock.now();
  const { final, flush, cutOff, phase } = await lastPasses(ctx, opts);

  const { notSaved, copies, uncopied, keep } = await settleLocalChanges(ctx, opts, { cutOff, phase });

  ctx.dispose();
  // A sync that outlived the unwind wait can no longer write, create or remove anything.
  for (const pass of ctx.passes) pass.store.dir.dispose();
  if (opts.keepIfIncomplete && (cutOff || notSaved.length > 0 || (final?.errors ?? 1) > 0)) {
    for (const pass of ctx.passes) {
      if (!keep.has(pass.store.root)) keep.set(pass.store.root, 'the store could not be reached for all of it; kept for a later attempt');
    }
  }
  const { removed, kept } = await ctx.mounted.unmount({ keep });
  return {
    ...(final ? { final } : {}),
    flush,
    cutOff,
    pendingUploads: notSaved.length,
    unsavedCopies: copies,
    uncopied,
    durationMs: ctx.clock.now() - started,
    removed,
    kept,
  };
}

/**
 * Steps 2 and 3 of {@link finishSession}: copy out what differs from the store, report it, and
 * carry the deletions not sent. The scans it takes are dropped when it returns, before the unmount.
 */
async function settleLocalChanges(
  ctx: FinishContext,
  opts: FinishOptions,
  end: { cutOff: boolean; phase: 'final' | 'flush' },
): Promise<{ notSaved: string[]; copies: string[]; uncopied: string[]; keep: Map<string, string> }> {
  // Whatever differs from the store (cut off, failed, skipped by the flush because the store
  // changed too, refused, unreadable) is about to be removed with the folder: copy it out first.
  // A folder holding a file that could not be copied is kept.
  const { unsaved, gone } = await unsavedPaths(ctx.passes);
  const notSaved = unsaved.filter((u) => u.upload).map((u) => `${u.pass.store.root}/${u.rel}`);
  const { copies, uncopied, keep } = await keepCopies(ctx.conflicts, unsaved);
  const keptAt = copies.length > 0 ? `; copies kept at ${copies.join(', ')}` : '';
  if (end.cutOff) {
    safeEmit(ctx.emitter, ctx.log, 'flushCutOff', { phase: end.phase, boundMs: ctx.finalFlushMs, pendingUploads: notSaved.length });
    ctx.log.warn(
      { bound_ms: ctx.finalFlushMs, phase: end.phase, not_saved: notSaved, copies },
      `final memory sync cut off after ${ctx.finalFlushMs} ms; ${notSaved.length} local change(s) did not reach the store${keptAt}`,
    );
  } else if (unsaved.length > 0) {
    ctx.log.warn(
      { not_saved: notSaved, unsaved: unsaved.map((u) => `${u.pass.store.root}/${u.rel}`), copies },
      `${unsaved.length} file(s) differ from the store at the end (${notSaved.length} not uploaded, the others refused or never synced)${keptAt}`,
    );
  }

  // Deletions this clean end confirmed but could not send (cut off, failed) go to the next
  // session of the store, which sends them first; nothing promised is dropped.
  if (opts.clean && ctx.finalDeletes === 'all' && ctx.deletions === 'enabled') await carryPendingDeletes(ctx.passes, gone);
  return { notSaved, copies, uncopied, keep };
}

/** The final sync (clean end) and the flush under one bound; then the running sync unwinds. */
async function lastPasses(
  ctx: FinishContext,
  opts: FinishOptions,
): Promise<{ final: SyncReport | undefined; flush: SyncReport; cutOff: boolean; phase: 'final' | 'flush' }> {
  const { scheduler } = ctx;
  scheduler.cancelTrailing();
  const bound = combineSignals([opts.signal], ctx.finalFlushMs);
  const onBound = (): void => scheduler.abortRunning(bound.signal.reason);
  bound.signal.addEventListener('abort', onBound, { once: true });
  let final: SyncReport | undefined;
  let flush = emptyReport();
  let phase: 'final' | 'flush' = opts.clean ? 'final' : 'flush';
  try {
    if (scheduler.running)
      await raceAbort(
        scheduler.running.catch(() => undefined),
        bound.signal,
      );
    if (opts.clean && !bound.signal.aborted) {
      final = await scheduler.start(bound.signal, 'final').catch(() => undefined);
    }
    if (!bound.signal.aborted) {
      phase = 'flush';
      flush = await scheduler.start(bound.signal, 'flush').catch(() => emptyReport());
    }
  } finally {
    bound.signal.removeEventListener('abort', onBound);
  }
  const cutOff = bound.signal.aborted;
  bound.dispose();
  // Let an aborted sync unwind (its requests are cancelled) before the folders go away.
  if (scheduler.running)
    await raceAbort(
      scheduler.running.catch(() => undefined),
      AbortSignal.timeout(2_000),
    ).catch(() => {});
  return { final, flush, cutOff, phase };
}

async function carryPendingDeletes(passes: readonly StorePass[], gone: ReadonlyMap<StorePass, string[]>): Promise<void> {
  await Promise.all(passes.map((pass) => carryStoreDeletes(pass, gone.get(pass))));
}

/** `goneFromScan`: the unsaved check's candidates (see {@link goneCandidates}), when its scan succeeded. */
async function carryStoreDeletes(pass: StorePass, goneFromScan: readonly string[] | undefined): Promise<void> {
  const { store, state } = pass;
  if (store.access !== 'read_write') return;
  // At a clean end every synced file still gone is a confirmed deletion (the final sync waives
  // the wait); one the final sync sent is out of the baseline already. Anything that is there
  // in any form (a FIFO, an unreadable entry) is not gone. The unsaved check's scan narrows the
  // check to the files it did not see; each of those is confirmed on disk.
  const candidates = goneFromScan ?? Object.keys(state.baseline).filter((rel) => !Object.hasOwn(state.refused, rel));
  const limit = pLimit(GONE_CHECKS_IN_FLIGHT);
  const gone = new Set<string>();
  await Promise.all(
    candidates.map((rel) =>
      limit(async () => {
        if (
          await store.dir.lstat(rel).then(
            (st) => st === undefined,
            () => false,
          )
        )
          gone.add(rel);
      }),
    ),
  );
  const carried = carriedDeletes(state, gone);
  const paths = Object.keys(carried);
  if (paths.length === 0) return;
  try {
    await store.carryDeletes(carried);
    store.log.warn({ paths }, `${paths.length} local deletion(s) not sent before the end; the next session of this store sends them first`);
  } catch (err) {
    store.log.warn(
      { paths, error: errorSummary(coerceError(err)) },
      'could not record the deletions not sent; the memories stay in the store',
    );
  }
}

/**
 * Every file that differs from the store (see {@link unsavedInScan}), and for each writable store
 * the synced files its scan did not see (the candidates for being gone). Reads only changed files
 * and keeps none of their bytes; a few stores are scanned at a time, and each scan is dropped
 * once read. When a folder cannot be scanned, the uploads its last sync planned but did not do
 * are reported instead (and it has no candidates: every synced file is checked).
 */
async function unsavedPaths(passes: readonly StorePass[]): Promise<{ unsaved: Unsaved[]; gone: Map<StorePass, string[]> }> {
  const out: Unsaved[] = [];
  const gone = new Map<StorePass, string[]>();
  const limit = pLimit(UNSAVED_SCANS_IN_FLIGHT);
  await Promise.all(
    passes.map((pass) =>
      limit(async () => {
        const { store, state } = pass;
        try {
          // A flush that found nothing to upload has just scanned the folder against this state.
          const scan =
            pass.takeSettledScan() ??
            (await scanLocal(store.dir, store.cache, { exclude: new Set(Object.keys(state.shadowed)), keptBytesBudget: 0 }));
          for (const u of unsavedInScan(state, scan, store.access === 'read_write')) out.push({ ...u, pass });
          if (store.access === 'read_write') gone.set(pass, goneCandidates(state, scan));
        } catch {
          out.push(...pass.notSaved.map((rel) => ({ pass, rel, upload: true, copyable: true })));
        }
      }),
    ),
  );
  const where = (u: Unsaved): string => `${u.pass.store.root}/${u.rel}`;
  return { unsaved: out.sort((a, b) => (where(a) < where(b) ? -1 : 1)), gone };
}

/**
 * Copy each unsaved file out of its mount (`<stateDir>/unsaved/<store>/<stamp>/<path>`). A file
 * that cannot be copied keeps its folder in place (`keep`), with a warning naming it.
 */
async function keepCopies(
  conflicts: ConflictCopies,
  unsaved: Unsaved[],
): Promise<{ copies: string[]; uncopied: string[]; keep: Map<string, string> }> {
  const stamp = conflictStamp();
  const copies: string[] = [];
  const uncopied: string[] = [];
  const keep = new Map<string, string>();
  for (const { pass, rel, copyable } of unsaved) {
    const { store } = pass;
    const where = `${store.root}/${rel}`;
    try {
      if (!copyable) throw new StateFileError('it could not be read', { path: where });
      copies.push(await conflicts.save(store.dir, store.storeId, rel, stamp, 'unsaved'));
    } catch (err) {
      uncopied.push(where);
      const reason = `${where} differs from the store and could not be copied out (${coerceError(err).message})`;
      if (!keep.has(store.root)) keep.set(store.root, reason);
      store.log.warn(
        { path: rel, error: errorSummary(coerceError(err)) },
        `could not keep a copy of ${where}; the folder ${store.root} is left in place so it is not lost. Save it, then remove the folder by hand`,
      );
    }
  }
  return { copies, uncopied, keep };
}

/** `p`'s value, or undefined once `signal` aborts first (or `p` rejects). */
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
