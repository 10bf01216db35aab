import type { BigIntStats } from 'node:fs';
import pLimit from 'p-limit';
import { statusOf } from '../../api/classify.js';
import { coerceError } from '../../errors.js';
import { isAbortError } from '../../internal/abort.js';
import { assertNever } from '../../internal/assert-never.js';
import { errorSummary, type Logger } from '../../internal/logger.js';
import type { ConflictCopies } from '../disk/conflict-copies.js';
import { LocalDir, LocalDirError, MAX_MEMORY_BYTES } from '../disk/local-dir.js';
import { sha256Hex } from '../disk/local-scan.js';
import type { LocalScan } from '../rules/scan.js';
import { relToRemotePath } from '../rules/paths.js';
import type { SyncAction, SyncPlan } from '../rules/plan.js';
import type { RemoteMemory, RemoteStore } from '../remote/remote-store.js';
import { isNewBlockedPull, localDeleteVerdict, pullRaceVerdict, remoteDeleteVerdict, uploadVerdict } from '../rules/race-rules.js';
import { sameFileStat } from '../rules/file-stat.js';
import { backdatedMtimeMs, type StatCache } from '../disk/stat-cache.js';
import { applyOutcomes, type ActionOutcome } from '../rules/sync-state.js';
import { pathEntry } from '../rules/path-record.js';
import { emptyReport } from '../rules/sync-report.js';
import type { MemoryEventMap, StoreSyncState, SyncReport } from '../rules/types.js';
import type { ContentCache } from '../disk/content-cache.js';
import { pullContent } from '../remote/pull-content.js';

/**
 * Runs one store's sync plan: the I/O edge of the planner. Actions run in four phases so that a
 * path freed on one side is free before another path needs it (local deletes, remote deletes,
 * pulls, uploads), each phase with bounded parallelism. Every action's outcome goes through the
 * planner's pure `applyOutcome` (as one transition per phase), so the state is always a consistent value.
 *
 * One failed file never fails the pass: it is logged, counted in `errors` and retried next sync.
 * An abort stops starting new actions; the ones in flight are cancelled through the signal.
 */
export interface ExecuteContext {
  storeId: string;
  dir: LocalDir;
  cache: StatCache;
  remote: RemoteStore;
  log: Logger;
  conflicts: ConflictCopies;
  /** Names this sync's conflict-copy folder. */
  stamp: string;
  scan: LocalScan;
  /** The listing this plan was made from (update times for backdating pulled files). */
  listed: ReadonlyMap<string, RemoteMemory>;
  concurrency: number;
  signal: AbortSignal;
  /** True once the mount is gone: no file is touched after that. */
  disposed: () => boolean;
  emit: <K extends keyof MemoryEventMap>(event: K, ...args: MemoryEventMap[K]) => void;
  /** True for the session's last passes (final sync, flush): no later sync will retry anything. */
  lastPass?: boolean;
  /** Where pulls take a content from when it is cached, and put what they fetch. */
  contents?: ContentCache | undefined;
}

/** What happens to a failed action next, said truthfully: a later sync, or the end-of-session rules. */
function retried(ctx: ExecuteContext): string {
  return ctx.lastPass ? 'no later sync: a local version that still differs is copied out at the end' : 'retried next sync';
}

export interface ExecuteResult {
  state: StoreSyncState;
  report: SyncReport;
  /** Uploads planned but not done (aborted, failed or skipped): local changes not in the store. */
  notSaved: string[];
}

const PHASES: ReadonlyArray<ReadonlyArray<SyncAction['kind']>> = [
  ['delete-local'],
  ['delete-remote'],
  ['pull'],
  ['push-create', 'push-update'],
];

export async function executePlan(ctx: ExecuteContext, initial: StoreSyncState, plan: SyncPlan): Promise<ExecuteResult> {
  let state = initial;
  const report = emptyReport();
  const notSaved = new Set<string>();
  // Outcomes are applied as one transition per phase: a plan holds one action per path and an
  // action reads only its own path's state, so no action depends on another's outcome in its phase.
  let steps: Array<[SyncAction, ActionOutcome]> = [];
  const record = (action: SyncAction, outcome: ActionOutcome): void => {
    steps.push([action, outcome]);
  };
  const settle = (): void => {
    state = applyOutcomes(state, steps);
    steps = [];
  };

  // State-only actions first: they touch nothing and need no request.
  for (const action of plan.actions) {
    switch (action.kind) {
      case 'refuse':
        report.refusals++;
        ctx.log.warn({ path: action.path, reason: action.reason }, 'not synced; reported once, retried only when the file changes');
        ctx.emit('refused', { storeId: ctx.storeId, path: action.path, reason: action.reason });
        record(action, { ok: true });
        break;
      case 'would-delete-remote':
        report.wouldDeletes++;
        ctx.log.info({ path: action.path }, 'memorySyncDeletions is "log_only": would delete this memory; kept in the store');
        ctx.emit('wouldDelete', { storeId: ctx.storeId, path: action.path });
        record(action, { ok: true });
        break;
      case 'await-delete':
      case 'adopt':
      case 'forget':
      case 'noop':
        record(action, { ok: true });
        break;
      case 'pull':
      case 'push-create':
      case 'push-update':
      case 'delete-local':
      case 'delete-remote':
        // Requests and file changes: run in the phases below.
        break;
      default:
        return assertNever(action);
    }
  }
  if (plan.deleteCapped > 0) {
    ctx.log.warn(
      { capped: plan.deleteCapped },
      'remote deletes held back by the per-sync cap; the next syncs (or the final one) send them',
    );
  }

  settle();
  const limit = pLimit(ctx.concurrency);
  for (const kinds of PHASES) {
    const actions = plan.actions.filter((a) => kinds.includes(a.kind));
    await Promise.all(
      actions.map((action) =>
        limit(async () => {
          const done = await executeAction(ctx, state, action, report);
          if (done.outcome !== undefined) record(action, done.outcome);
          if (done.notSaved) notSaved.add(action.path);
        }),
      ),
    );
    settle();
  }
  return { state, report, notSaved: [...notSaved].sort() };
}

/** What one executed action left: the outcome to record (none when skipped), and whether it was an upload left undone. */
export interface ActionDone {
  outcome: ActionOutcome | undefined;
  notSaved: boolean;
}

/**
 * Run one request or file action of a plan as {@link executePlan} does: nothing once the pass is
 * aborted or the mount gone, and a failure is logged and counted, never thrown. `state` is read
 * for the action's own path only.
 */
export async function executeAction(
  ctx: ExecuteContext,
  state: StoreSyncState,
  action: SyncAction,
  report: SyncReport,
): Promise<ActionDone> {
  const isUpload = action.kind === 'push-create' || action.kind === 'push-update';
  if (ctx.signal.aborted || ctx.disposed()) return { outcome: undefined, notSaved: isUpload };
  try {
    const outcome = await runAction(ctx, state, action, report);
    return { outcome, notSaved: outcome !== undefined && !outcome.ok && isUpload && outcome.failure !== 'refused' };
  } catch (e) {
    if (!(ctx.signal.aborted || isAbortError(e) || ctx.disposed())) {
      report.errors++;
      ctx.log.warn({ path: action.path, action: action.kind, error: errorSummary(coerceError(e)) }, `sync action failed; ${retried(ctx)}`);
    }
    return { outcome: undefined, notSaved: isUpload };
  }
}

/** Run one action; `undefined` means "record nothing" (skipped without an outcome). */
async function runAction(
  ctx: ExecuteContext,
  state: StoreSyncState,
  action: SyncAction,
  report: SyncReport,
): Promise<ActionOutcome | undefined> {
  switch (action.kind) {
    case 'pull':
      return pull(ctx, state, action, report);
    case 'push-create':
    case 'push-update':
      return push(ctx, action, report);
    case 'delete-local':
      return deleteLocal(ctx, action, report);
    case 'delete-remote': {
      // Re-check right before the request: a file that came back since the scan is not deleted.
      const now = await ctx.dir.lstat(action.path).then(
        (st) => (st === undefined ? 'missing' : st.isDirectory() ? 'folder' : 'other'),
        (e: unknown) => (e instanceof LocalDirError && e.failure === 'not-directory' ? 'missing' : 'unknown'),
      );
      const verdict = remoteDeleteVerdict(now);
      if (verdict.action === 'keep') {
        ctx.log.info({ path: action.path }, 'the file is there again (or cannot be checked); its memory is not deleted');
        return verdict.outcome;
      }
      const r = await ctx.remote.delete(action.id, action.expectedSha, ctx.signal);
      if (r.ok) {
        report.deletes++;
        ctx.log.info({ path: action.path }, 'memory deleted in the store (local file stayed deleted)');
        ctx.emit('deleted', { storeId: ctx.storeId, path: action.path, side: 'remote' });
        return { ok: true };
      }
      if (r.failure === 'precondition') {
        ctx.log.warn({ path: action.path }, 'memory changed in the store since; not deleted, the store version comes back');
      } else {
        report.errors++;
        ctx.log.warn(
          { path: action.path, reason: r.reason },
          ctx.lastPass ? 'remote delete failed; the next session of this store sends it' : 'remote delete failed; retried next sync',
        );
      }
      return { ok: false, failure: r.failure, reason: r.reason };
    }
    case 'refuse':
    case 'would-delete-remote':
    case 'await-delete':
    case 'adopt':
    case 'forget':
    case 'noop':
      // State-only: recorded before the phases run.
      return undefined;
    default:
      return assertNever(action);
  }
}

async function pull(
  ctx: ExecuteContext,
  state: StoreSyncState,
  action: Extract<SyncAction, { kind: 'pull' }>,
  report: SyncReport,
): Promise<ActionOutcome | undefined> {
  const log = ctx.log.child({ path: action.path });
  // Can the folder hold this path at all? Checked before fetching, so a blocked path costs no request.
  const blocked = await writeBlocker(ctx.dir, action.path);
  if (blocked !== undefined) {
    if (isNewBlockedPull(state.blockedPulls, action.path, action.sha)) {
      report.refusals++;
      log.warn({ reason: blocked }, 'memory cannot be written here; reported once per version, retried when the folder changes');
      ctx.emit('refused', { storeId: ctx.storeId, path: action.path, reason: blocked });
    }
    return { ok: false, failure: 'blocked', reason: blocked };
  }

  let fetched;
  try {
    fetched = await pullContent(ctx.remote, ctx.contents, action, ctx.listed.get(action.path), ctx.signal, log);
  } catch (e) {
    if (ctx.signal.aborted || isAbortError(e)) throw e;
    if (statusOf(e) === 404) return { ok: false, failure: 'not-found' };
    report.errors++;
    log.warn({ error: errorSummary(coerceError(e)) }, `download failed; ${retried(ctx)}`);
    return { ok: false, failure: 'transient' };
  }
  if (ctx.disposed() || ctx.signal.aborted) return undefined;
  const bytes = fetched.bytes;
  const sha = fetched.cached ? fetched.sha : sha256Hex(bytes);
  if (!fetched.cached && sha === fetched.sha) ctx.contents?.put(sha, bytes, true);

  // Keep the local bytes the store's version is about to replace, when they were never synced:
  // a planned conflict, or an edit that raced this sync.
  let conflictCopy: string | undefined;
  const plannedConflict = action.why === 'conflict';
  const current = await ctx.dir.lstat(action.path);
  const fileThere = current?.isFile() === true;
  const changed =
    fileThere && !plannedConflict && !sameFileStat(current!, ctx.scan.stats.get(action.path))
      ? { sha: await hashLocal(ctx.dir, action.path) }
      : undefined;
  const race = pullRaceVerdict({
    plannedConflict,
    fileThere,
    changed,
    baseSha: pathEntry(state.baseline, action.path)?.sha,
    fetchedSha: sha,
    storeSha: fetched.sha,
  });
  if (race.action === 'keep-local') {
    log.info(
      ctx.lastPass
        ? 'changed here while being downloaded, and unchanged in the store; the local edit is kept (uploaded by the flush, or copied out)'
        : 'changed here while being downloaded, and unchanged in the store; the local edit is kept and uploaded next sync',
    );
    return race.outcome;
  }
  const conflict = race.action === 'copy-then-write';
  if (conflict) {
    try {
      conflictCopy = await ctx.conflicts.save(ctx.dir, ctx.storeId, action.path, ctx.stamp);
    } catch (e) {
      // Never overwrite bytes we could not keep.
      report.errors++;
      log.warn({ error: errorSummary(coerceError(e)) }, `could not keep a conflict copy; local file left as is; ${retried(ctx)}`);
      return { ok: false, failure: 'transient' };
    }
  }

  const listed = ctx.listed.get(action.path);
  const st = await ctx.dir.writeFileAtomic(action.path, bytes, { mtimeMs: backdatedMtimeMs(fetched.updatedAt ?? listed?.updatedAt) });
  ctx.cache.record(action.path, st, sha, true, ctx.cache.nowNs());
  report.downloads++;
  if (conflict) {
    report.conflicts++;
    log.warn(
      { conflict_copy: conflictCopy },
      `changed both here and in the store; the store's version wins. Local version kept at ${conflictCopy ?? '(no copy)'}`,
    );
    ctx.emit('conflict', { storeId: ctx.storeId, path: action.path, conflictCopy });
  }
  log.debug('downloaded');
  ctx.emit('downloaded', { storeId: ctx.storeId, path: action.path, sha: fetched.sha });
  return { ok: true, id: fetched.id, sha: fetched.sha };
}

async function push(
  ctx: ExecuteContext,
  action: Extract<SyncAction, { kind: 'push-create' | 'push-update' }>,
  report: SyncReport,
): Promise<ActionOutcome | undefined> {
  // Most uploads log nothing: the path's logger is made when a line is written.
  let child: Logger | undefined;
  const log = (): Logger => (child ??= ctx.log.child({ path: action.path }));
  // The scan's own bytes when it kept them: they are what it hashed to action.sha. Else the file
  // is read again, and sent only if it still holds that version.
  let bytes: Buffer | undefined = ctx.scan.contents.get(action.path);
  let sha = action.sha;
  if (bytes === undefined) {
    try {
      bytes = (await ctx.dir.readFile(action.path)).bytes;
    } catch (e) {
      if (e instanceof LocalDirError) {
        // Gone, swapped or grown since the scan: the next sync sees what is there now.
        return { ok: false, failure: 'transient', reason: e.message };
      }
      throw e;
    }
    sha = sha256Hex(bytes);
    const fresh = uploadVerdict(sha, action.sha);
    if (fresh.action === 'skip') return fresh.outcome;
  }
  const content = bytes.toString('utf8');
  const serverPath = relToRemotePath(action.path);
  const r =
    action.kind === 'push-create'
      ? await ctx.remote.create(serverPath, content, ctx.signal)
      : await ctx.remote.update(action.id, serverPath, content, action.expectedSha, ctx.signal);
  if (r.ok) {
    report.uploads++;
    if (r.sha !== sha) log().warn({ sent_sha: sha, stored_sha: r.sha }, 'the store hashed the upload differently');
    if (ctx.log.isLevelEnabled('debug')) log().debug({ created: action.kind === 'push-create' }, 'uploaded');
    ctx.emit('uploaded', { storeId: ctx.storeId, path: action.path, sha: r.sha, created: action.kind === 'push-create' });
    return { ok: true, id: r.id, sha: r.sha };
  }
  switch (r.failure) {
    case 'refused':
      report.refusals++;
      log().warn({ reason: r.reason }, 'upload refused; reported once, retried only when the file changes');
      ctx.emit('refused', { storeId: ctx.storeId, path: action.path, reason: r.reason });
      break;
    case 'precondition':
      log().warn(
        ctx.lastPass
          ? 'memory changed in the store since the listing; the store version stands and the local one is copied out at the end'
          : 'memory changed in the store since the listing; the next sync takes the store version (store wins)',
      );
      break;
    case 'not-found':
      log().info(
        ctx.lastPass
          ? 'memory was deleted in the store meanwhile; the local version is copied out at the end'
          : 'memory was deleted in the store meanwhile; the next sync re-creates it',
      );
      break;
    case 'lost-response':
      report.errors++;
      log().warn({ reason: r.reason }, 'upload response lost; the next listing settles it by sha');
      break;
    case 'transient':
      report.errors++;
      log().warn({ reason: r.reason }, `upload failed; ${retried(ctx)}`);
      break;
    default:
      return assertNever(r.failure);
  }
  return { ok: false, failure: r.failure, reason: r.reason, sentSha: sha };
}

async function deleteLocal(
  ctx: ExecuteContext,
  action: Extract<SyncAction, { kind: 'delete-local' }>,
  report: SyncReport,
): Promise<ActionOutcome | undefined> {
  if (ctx.disposed()) return undefined;
  const current = await ctx.dir.lstat(action.path);
  const isFile = current?.isFile() === true;
  const changed =
    isFile && !sameFileStat(current!, ctx.scan.stats.get(action.path)) ? { sha: await hashLocal(ctx.dir, action.path) } : undefined;
  const verdict = localDeleteVerdict({
    current: current === undefined ? 'none' : isFile ? 'file' : 'not-a-file',
    changed,
    expectedSha: action.expectedLocalSha,
  });
  if (verdict.action === 'done') return verdict.outcome;
  await ctx.dir.removeFile(action.path);
  ctx.cache.delete(action.path);
  report.localDeletes++;
  ctx.log.info({ path: action.path }, 'memory deleted in the store; local file removed');
  ctx.emit('deleted', { storeId: ctx.storeId, path: action.path, side: 'local' });
  return { ok: true };
}

/** Why `rel` cannot be written in `dir` (a file where a folder is needed, a folder where the file goes, a symlink), or undefined. */
async function writeBlocker(dir: LocalDir, rel: string): Promise<string | undefined> {
  const segments = rel.split('/');
  for (let i = 1; i < segments.length; i++) {
    const prefix = segments.slice(0, i).join('/');
    let st: BigIntStats | undefined;
    try {
      st = await dir.lstat(prefix);
    } catch (e) {
      if (e instanceof LocalDirError) return e.message;
      throw e;
    }
    if (st === undefined) return undefined;
    if (st.isSymbolicLink()) return `${prefix} is a symlink here; never followed`;
    if (!st.isDirectory()) return `${prefix} is a file here, where the store has a folder`;
  }
  try {
    const st = await dir.lstat(rel);
    if (st?.isDirectory()) return `${rel} is a folder here, where the store has a file`;
  } catch (e) {
    if (e instanceof LocalDirError) return e.message;
    throw e;
  }
  return undefined;
}

/**
 * Sha of the file now; `'too-large'` for a file over the store's size limit (never read whole: it
 * cannot be a version the store or the baseline holds, so it counts as changed), undefined when not
 * a regular file.
 */
async function hashLocal(dir: LocalDir, rel: string): Promise<string | undefined> {
  try {
    return sha256Hex((await dir.readFile(rel, MAX_MEMORY_BYTES)).bytes);
  } catch (e) {
    if (e instanceof LocalDirError) return e.failure === 'too-large' ? 'too-large' : undefined;
    throw e;
  }
}
