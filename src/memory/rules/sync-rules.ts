/**
 * The decisions a sync makes around the plan, beside {@link planSync}: which listed memories the
 * folder can hold, which refusals have ended, whether a flush has anything to send, what is still
 * unsaved at the end, and the fix a skip warning names. Pure: no file, request or clock.
 */

import type { LocalScan, SkippedEntry } from './scan.js';
import { caseCollisionReason, foldCase, groupCaseCollisions, remotePathToRel } from './paths.js';
import type { RemoteEntry } from './plan.js';
import { isPathConflictReason } from './path-conflict.js';
import type { StoreSyncState } from './types.js';
import { setPathKey, pathEntry } from './path-record.js';
import { isMarkedForRestore } from './restore-rule.js';

/** The listing as the planner sees it. */
export interface RemoteView<M> {
  /** Listed memories the folder can hold, by store-relative path. */
  byRel: Map<string, M>;
  /** The same, as planner entries. */
  remote: Map<string, RemoteEntry>;
  /** Every shadowed path after this listing (the state's new `shadowed`). */
  shadowed: Record<string, { reason: string }>;
  /** Paths shadowed for the first time: each is warned about once. */
  newlyShadowed: Array<{ path: string; reason: string }>;
}

/**
 * Key the listing by store-relative path and shadow what the folder cannot hold: paths that fail
 * the path check, paths already shadowed (a shadowed path stays shadowed while it is listed), and
 * on a case-insensitive folder all but one spelling of a case collision. Among colliding
 * spellings, a path the baseline holds (it is what the folder holds) wins against newcomers.
 * A shadowed path no longer listed is dropped from `shadowed`.
 */
export function remoteView<M extends { path: string; id: string; sha: string }>(
  listed: readonly M[],
  state: Pick<StoreSyncState, 'baseline' | 'shadowed'>,
  caseInsensitive: boolean,
): RemoteView<M> {
  const byRel = new Map<string, M>();
  const shadowed: Record<string, { reason: string }> = {};
  const newlyShadowed: Array<{ path: string; reason: string }> = [];
  const keepShadow = (key: string, reason: string): void => {
    const known = pathEntry(state.shadowed, key);
    if (known === undefined) newlyShadowed.push({ path: key, reason });
    setPathKey(shadowed, key, known ?? { reason });
  };
  for (const m of listed) {
    const check = remotePathToRel(m.path);
    if (!check.ok) {
      keepShadow(m.path, check.reason);
      continue;
    }
    const known = pathEntry(state.shadowed, check.rel);
    if (known !== undefined) keepShadow(check.rel, known.reason);
    else byRel.set(check.rel, m);
  }
  if (caseInsensitive) {
    for (const s of caseLosers([...byRel.keys()], state.baseline)) {
      keepShadow(s.path, s.reason);
      byRel.delete(s.path);
    }
  }
  const remote = new Map<string, RemoteEntry>();
  for (const [rel, m] of byRel) remote.set(rel, { id: m.id, sha: m.sha });
  return { byRel, remote, shadowed, newlyShadowed };
}

/**
 * The listed paths a case-insensitive folder cannot hold beside the others. The spellings the
 * baseline holds are what the folder holds: they are kept first, and a newcomer colliding with one
 * is shadowed whatever the order of the two spellings; newcomers then collide among themselves.
 */
function caseLosers(paths: readonly string[], baseline: Readonly<Record<string, unknown>>): Array<{ path: string; reason: string }> {
  const known = groupCaseCollisions(paths.filter((p) => Object.hasOwn(baseline, p)));
  const spellingByFold = new Map<string, { spelling: string; keptPath: string }>();
  for (const kept of known.kept) {
    for (const prefix of prefixesOf(kept)) {
      if (!spellingByFold.has(foldCase(prefix))) spellingByFold.set(foldCase(prefix), { spelling: prefix, keptPath: kept });
    }
  }
  const losers: Array<{ path: string; reason: string }> = [...known.shadowed];
  const fresh: string[] = [];
  for (const path of paths) {
    if (Object.hasOwn(baseline, path)) continue;
    const clash = prefixesOf(path)
      .map((prefix) => ({ prefix, taken: spellingByFold.get(foldCase(prefix)) }))
      .find(({ prefix, taken }) => taken !== undefined && taken.spelling !== prefix)?.taken;
    if (clash !== undefined) losers.push({ path, reason: caseCollisionReason(path, clash.spelling, clash.keptPath) });
    else fresh.push(path);
  }
  // No remaining newcomer collides with a kept baseline path, so only newcomers lose here.
  losers.push(...groupCaseCollisions([...known.kept, ...fresh]).shadowed);
  return losers;
}

/** `a`, `a/b`, `a/b/c.md` for `a/b/c.md`. */
function prefixesOf(path: string): string[] {
  const segments = path.split('/');
  return segments.map((_, i) => segments.slice(0, i + 1).join('/'));
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

/**
 * True when this version of `rel` was refused for a reason that holds until the file changes
 * (binary, too large, read-only…). A path-conflict refusal does not count: it ends when the
 * overlapping memory is deleted, so the file is still a local change waiting to be saved.
 */
export function isSettledRefusal(state: Pick<StoreSyncState, 'refused'>, rel: string, sha: string): boolean {
  const refused = pathEntry(state.refused, rel);
  return refused !== undefined && refused.fingerprint === sha && !isPathConflictReason(refused.reason);
}

/** True when a regular file differs from the baseline in a version not settled as refused: a flush has something to send. */
export function hasLocalChanges(state: Pick<StoreSyncState, 'baseline' | 'refused'>, entries: LocalScan['entries']): boolean {
  for (const [rel, entry] of entries) {
    if (entry.kind !== 'file') continue;
    if (pathEntry(state.baseline, rel)?.sha === entry.sha) continue;
    if (isSettledRefusal(state, rel, entry.sha)) continue;
    return true;
  }
  return false;
}

/** One path that differs from the store at the end. */
export interface UnsavedPath {
  rel: string;
  /** A local change of a writable store that should have been uploaded. */
  upload: boolean;
  /** False for entries that could not be read at all. */
  copyable: boolean;
}

/**
 * Every path of a final scan that differs from the store: changed or new regular files and
 * unsyncable ones (an upload left undone only for a writable store's regular file not settled as
 * refused), our reserved temp names, and entries that could not be read (not copyable).
 */
export function unsavedInScan(
  state: Pick<StoreSyncState, 'baseline' | 'refused'>,
  scan: Pick<LocalScan, 'entries' | 'reserved' | 'skipped'>,
  writable: boolean,
): UnsavedPath[] {
  const out: UnsavedPath[] = [];
  for (const [rel, entry] of scan.entries) {
    if (entry.kind === 'file' && pathEntry(state.baseline, rel)?.sha === entry.sha) continue;
    const upload = writable && entry.kind === 'file' && !isSettledRefusal(state, rel, entry.sha);
    out.push({ rel, upload, copyable: true });
  }
  for (const rel of scan.reserved) out.push({ rel, upload: false, copyable: true });
  for (const s of scan.skipped) {
    if (s.kind === 'unreadable' || s.kind === 'too-long' || s.kind === 'too-deep') out.push({ rel: s.rel, upload: false, copyable: false });
  }
  return out;
}

/** Whether a skipped entry is warned about: not one that changed under the scan (the next sync sees it settled). */
export function warnsSkip(kind: SkippedEntry['kind']): boolean {
  return kind !== 'vanished';
}

/** The fix a skip warning names for the entry at `where`. */
export function skipFix(kind: SkippedEntry['kind'], where: string): string {
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

/**
 * The deletions a clean end hands to the next session of the store: every baseline file found gone
 * (`gone`), not refused and not marked to be put back. A folder emptied whole (every baseline file gone, at least two) is a
 * wipe, never a mass deletion: nothing is carried then.
 */
export function carriedDeletes(
  state: Pick<StoreSyncState, 'baseline' | 'refused' | 'restore'>,
  gone: ReadonlySet<string>,
): Record<string, { id: string; sha: string }> {
  const carried: Record<string, { id: string; sha: string }> = {};
  const baseline = Object.entries(state.baseline);
  for (const [rel, base] of baseline) {
    // A file a stopped call may have moved away was never deleted by the agent: never carried.
    if (Object.hasOwn(state.refused, rel) || !gone.has(rel) || isMarkedForRestore(state, rel)) continue;
    setPathKey(carried, rel, { id: base.id, sha: base.sha });
  }
  const wiped = baseline.length > 1 && Object.keys(carried).length === baseline.length;
  return wiped ? {} : carried;
}
