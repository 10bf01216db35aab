/**
 * The sync decision function (its rules: docs/design.md, "Sync", "Conflicts", "Deletes"). Pure: it sees the sync
 * state of one store, a local scan and a remote listing, and returns the list of actions that
 * reconcile them. It reads no file, sends no request and keeps no clock; the executor runs the
 * plan and reports each action's outcome to `applyOutcome` (in `sync-state.ts`), which returns the
 * next state.
 *
 * Every path is keyed by its presence in (baseline, local, remote) — eight cases, switched over
 * exhaustively — and then by comparing shas. The store is the source of truth: when both sides
 * changed, the store's version wins and the local bytes are kept as a conflict copy by the
 * executor.
 *
 * Executor contract:
 * - call `applyOutcome` for **every** action, including the state-only ones
 *   ({@link isStateOnlyAction}: `noop`, `adopt`, `forget`, `await-delete`, `refuse`,
 *   `would-delete-remote`) with `{ ok: true }`; every action except `await-delete` and
 *   `delete-remote` ends a pending delete of its path, whatever the outcome;
 * - fetch content only for `pull` ({@link needsRemoteContent}) and read local bytes only for
 *   `push-create`/`push-update` and for the conflict copy of a `pull` with `why: 'conflict'`
 *   ({@link needsLocalContent});
 * - for a `pull` with `why: 'conflict'`, copy the current local file out of the mount first;
 *   for any other pull, never overwrite an edit made after the scan (the file no longer matches
 *   `expectedLocalSha`): skip it (`transient`) or keep a conflict copy first;
 * - for `delete-local`, delete only if the file still holds `expectedLocalSha` (else report a
 *   `precondition` failure);
 * - for push actions, upload exactly the bytes whose sha the plan names; if the file changed
 *   since the scan, skip the upload (`transient`) so the next sync sees the new version.
 */

import { assertNever } from '../../internal/assert-never.js';
import { checkRelPath } from './paths.js';
import type { BaselineEntry, MemoryDeleteMode, StoreSyncState } from './types.js';
import { pathEntry } from './path-record.js';
import { isMarkedForRestore } from './restore-rule.js';

/**
 * Local view of one path, produced by the local scan. Unchanged files are not read: the stat
 * cache supplies their sha.
 */
export type LocalEntry =
  | {
      kind: 'file';
      /** Lowercase hex SHA-256 of the file's bytes. */
      sha: string;
      /** Size in bytes. */
      size: number;
    }
  | {
      /**
       * Present but not uploadable as is: over the server's size limit (never read whole), not
       * UTF-8, a name the server refuses, … Treated as a local change whose bytes are unknown.
       */
      kind: 'unsyncable';
      /** Why it cannot be synced; reported once per `fingerprint`. */
      reason: string;
      /** Identifies this content version cheaply (e.g. `size:mtimeNs:ino`, or the sha when known). */
      fingerprint: string;
    };

/** One memory as the basic-view listing shows it. */
export interface RemoteEntry {
  /** Memory id (`mem_…`). */
  id: string;
  /** Lowercase hex SHA-256 of the content (`content_sha256`). */
  sha: string;
}

/**
 * Which sync runs:
 * - `sync`: routine sync after tool calls;
 * - `final`: the last full sync at a clean session end; the later-sync wait for remote deletes
 *   is waived (the session will not come back to confirm);
 * - `flush`: push-only pass at teardown: uploads of locally changed files, nothing else (no
 *   pulls, no deletes on either side, and a path that also changed remotely is skipped).
 */
export type SyncPhase = 'sync' | 'final' | 'flush';

/** Everything {@link planSync} decides from. */
export interface PlanInput {
  /** The store's sync state: baseline, pending deletes, sent shas, refusals, shadowed paths, generation, access. */
  state: StoreSyncState;
  /**
   * Every regular file below the mount root, keyed by store-relative path, except the marker,
   * our temp files and shadowed paths. Non-regular entries (symlinks, FIFOs, …) are left out.
   */
  local: ReadonlyMap<string, LocalEntry>;
  /**
   * Every memory listed (basic view), keyed by store-relative path (leading `/` stripped, checked
   * with `remotePathToRel`). Paths that failed the check are left out and recorded in
   * `state.shadowed` by the caller; the planner also ignores any key that fails `checkRelPath`.
   */
  remote: ReadonlyMap<string, RemoteEntry>;
  /** What a local deletion may do on the server. */
  deletions: MemoryDeleteMode;
  phase: SyncPhase;
  /**
   * Local paths the scan could not read as regular files (a FIFO, a symlink, an unreadable or
   * over-long entry, and every path below a skipped folder; see `isUnderSkipped`). Such a path is
   * not absent: nothing is deleted, pulled over it or forgotten; it is left as is.
   */
  skipped?: (path: string) => boolean;
  /**
   * Monotonic ms of this sync. Recorded on a file first seen missing; with `deleteAfterMs`, a
   * pending delete is confirmed only once the file has been gone that long. Absent: no time rule.
   */
  nowMs?: number;
  /** Least time (ms) a file must have been gone before a routine sync deletes its memory. Default 0. */
  deleteAfterMs?: number;
  /**
   * Which local deletions the `final` sync carries out: `all` (the session ends: nothing will come
   * back to confirm; default), or `corroborated`, only those an earlier sync already saw missing
   * (recovering a leftover, where a missing file may never have been seen by anyone).
   */
  finalDeletes?: 'all' | 'corroborated';
}

/** Why a `pull` action downloads a memory. */
export type PullReason =
  /** The store changed, the local file did not. */
  | 'remote-changed'
  /** A memory the local side has never seen. */
  | 'remote-new'
  /** Both sides changed to different bytes: the store wins; the executor keeps a conflict copy first. */
  | 'conflict'
  /** The local file was deleted, but the store changed meanwhile: the store's version comes back. */
  | 'restore'
  /** A tool call that was stopped or timed out may have moved the file away: the store's version is put back. */
  | 'put-back'
  /** The whole folder was wiped: everything is downloaded again instead of deleted remotely. */
  | 'redownload';

/** One step of a plan. Every action names its store-relative `path`. */
export type SyncAction =
  | {
      /** Download the memory and write it atomically to `path` (replacing what is there). */
      kind: 'pull';
      path: string;
      /** Memory id to fetch. */
      id: string;
      /** Sha the listing showed; the fetched content may be newer, and its own sha is what the baseline records. */
      sha: string;
      why: PullReason;
      /**
       * Sha of the local file the scan saw; absent when the scan saw no file (or an unsyncable
       * one). Before a non-conflict pull overwrites, the executor checks the file still holds
       * exactly this (or is still missing); if the agent wrote meanwhile it skips the pull
       * (`transient`), so the next sync sees a conflict instead of losing the edit.
       */
      expectedLocalSha?: string;
    }
  | {
      /** Create the memory from the local file. */
      kind: 'push-create';
      path: string;
      /** Sha of the local bytes to upload. */
      sha: string;
    }
  | {
      /** Update the memory from the local file, with a `content_sha256` precondition. */
      kind: 'push-update';
      path: string;
      /** Memory id to update. */
      id: string;
      /** Sha of the local bytes to upload. */
      sha: string;
      /** Precondition: the sha the memory must still hold (the listed one). */
      expectedSha: string;
    }
  | {
      /** Delete the local file (the memory was deleted in the store). */
      kind: 'delete-local';
      path: string;
      /** Delete only if the file still holds these bytes; otherwise report a `precondition` failure. */
      expectedLocalSha: string;
    }
  | {
      /** Delete the memory (`expected_content_sha256` precondition): a later sync confirmed the file is still gone. */
      kind: 'delete-remote';
      path: string;
      id: string;
      expectedSha: string;
    }
  | {
      /** `log_only`: the memory would be deleted now; log it and keep the memory. State-only. */
      kind: 'would-delete-remote';
      path: string;
      id: string;
    }
  | {
      /** The local file is missing; remember it, and let a later sync confirm it before deleting. State-only. */
      kind: 'await-delete';
      path: string;
      /** Baseline sha of the missing file; the pending delete is valid only while the baseline keeps it. */
      baseSha: string;
      /** True when the delete was confirmed but held back by the per-sync cap; it stays pending. */
      capped: boolean;
      /** Monotonic ms of the sync that planned it (recorded when the file is first seen missing). */
      atMs?: number;
    }
  | {
      /** Both sides hold the same bytes: record them as the baseline (also settles a lost upload). State-only. */
      kind: 'adopt';
      path: string;
      id: string;
      sha: string;
    }
  | {
      /** Gone on both sides: drop the path from the state. State-only. */
      kind: 'forget';
      path: string;
    }
  | {
      /** This local version cannot or may not be synced: report it once, then leave it until it changes. State-only. */
      kind: 'refuse';
      path: string;
      reason: string;
      /** The local version refused (`LocalEntry` sha or fingerprint, or {@link DELETED_FINGERPRINT}). */
      fingerprint: string;
    }
  | {
      /** Nothing to do for this path. State-only (clears a stale pending delete). */
      kind: 'noop';
      path: string;
    };

/** The kinds of {@link SyncAction}. */
export type SyncActionKind = SyncAction['kind'];

/** The result of {@link planSync}. */
export interface SyncPlan {
  /** One action per path seen in the baseline, the local scan or the listing, in ascending path order. */
  actions: SyncAction[];
  /**
   * True when the whole folder was found wiped (every file the last sync saw, at least two, is
   * gone at once): everything is pulled again and nothing is deleted.
   */
  wiped: boolean;
  /** Remote deletes confirmed but held back by the per-sync cap (they stay pending). */
  deleteCapped: number;
}

/**
 * Fingerprint of "the file is missing locally", used in `state.refused` when a local deletion
 * is deliberately not synced (read-only store, `disabled`, `log_only` after it was logged once).
 */
export const DELETED_FINGERPRINT = '<deleted>';

/** Floor, ceiling and divisor of the per-sync remote-delete cap. */
export const DELETE_CAP_MIN = 8;
export const DELETE_CAP_MAX = 50;
export const DELETE_CAP_DIVISOR = 4;

/** Most remote deletes one sync may send: `max(8, min(50, floor(baselineSize / 4)))`. */
export function deleteCapFor(baselineSize: number): number {
  return Math.max(DELETE_CAP_MIN, Math.min(DELETE_CAP_MAX, Math.floor(baselineSize / DELETE_CAP_DIVISOR)));
}

/** True when the action changes only the sync state: no request, no file touched. */
export function isStateOnlyAction(action: SyncAction): boolean {
  switch (action.kind) {
    case 'noop':
    case 'adopt':
    case 'forget':
    case 'await-delete':
    case 'refuse':
    case 'would-delete-remote':
      return true;
    case 'pull':
    case 'push-create':
    case 'push-update':
    case 'delete-local':
    case 'delete-remote':
      return false;
    default:
      return assertNever(action);
  }
}

/** True when the executor must fetch the memory's full content (a `pull`). */
export function needsRemoteContent(action: SyncAction): action is Extract<SyncAction, { kind: 'pull' }> {
  return action.kind === 'pull';
}

/**
 * True when the executor must read the local file's bytes: uploads, and a conflict pull (whose
 * losing local bytes are copied out of the mount first).
 */
export function needsLocalContent(action: SyncAction): boolean {
  return action.kind === 'push-create' || action.kind === 'push-update' || (action.kind === 'pull' && action.why === 'conflict');
}

/** True when the action sends a write to the store (uploads and remote deletes). */
export function isRemoteWrite(action: SyncAction): boolean {
  return action.kind === 'push-create' || action.kind === 'push-update' || action.kind === 'delete-remote';
}

/** Presence of a path in (baseline, local, remote), one bit each, in that order. */
type PresenceKey = '000' | '001' | '010' | '011' | '100' | '101' | '110' | '111';

function presenceKey(base: boolean, local: boolean, remote: boolean): PresenceKey {
  return `${base ? 1 : 0}${local ? 1 : 0}${remote ? 1 : 0}` as PresenceKey;
}

/** Reasons reported for versions that are deliberately not synced. */
export const REFUSAL_READ_ONLY_EDIT = 'read-only store: local changes are never uploaded; the next change in the store overwrites them';
export const REFUSAL_READ_ONLY_DELETE =
  'read-only store: a local deletion is never synced; the memory stays in the store and comes back when it changes';

export const REFUSAL_DELETIONS_DISABLED =
  'memorySyncDeletions is "disabled": a local deletion is never synced; the memory stays in the store and comes back when it changes';

/** Everything the per-path rules look at, resolved once. */
interface PathFacts {
  path: string;
  /** The baseline, or — when the listing shows a sha we sent whose response was lost — that remote version. */
  base: BaselineEntry | undefined;
  /** True when the recorded baseline is exactly the listed memory and no sent/refused entry remains. */
  baseClean: boolean;
  local: LocalEntry | undefined;
  remote: RemoteEntry | undefined;
  /** The refused version of this path, if any. */
  refusedFingerprint: string | undefined;
}

/** Sha (file) or fingerprint (unsyncable) of the local version: what `refused` is keyed on. */
function versionOf(local: LocalEntry): string {
  return local.kind === 'file' ? local.sha : local.fingerprint;
}

/** `{ expectedLocalSha }` for a regular file, nothing for an unsyncable one. */
function localShaOf(local: LocalEntry): { expectedLocalSha?: string } {
  return local.kind === 'file' ? { expectedLocalSha: local.sha } : {};
}

/** A delete-remote decision before the per-sync cap is applied. */
interface DeleteCandidate {
  index: number;
  path: string;
  baseSha: string;
}

/**
 * Decide what one sync of one store does. Pure and deterministic: the same input gives the same
 * plan, with one action per path in ascending code-unit order.
 *
 * Rules (base = last synced version, L = local file, R = remote memory):
 * - whole folder wiped (baseline > 1 entry, no local file left): pull everything again, delete
 *   nothing (`wiped: true`);
 * - L and R hold the same bytes: adopt (or noop when that is already the clean baseline);
 * - only R changed: pull. Only L changed: upload (update with precondition, or create). Both
 *   changed: the store wins (conflict pull);
 * - L deleted, R unchanged: remote delete once a later sync (or the final one) confirms it, per
 *   deletion mode, capped per sync; L deleted, R changed: restore; L missing since a tool call was
 *   stopped or timed out (marked, see `restore-rule.ts`): put back, never deleted;
 * - R deleted, L unchanged: delete the local file; R deleted, L edited: re-create (writable) or
 *   delete the local file (read-only);
 * - read-only store: never upload, never delete remotely; a local edit or deletion is reported
 *   once and left alone until the store changes;
 * - a version already refused (same sha/fingerprint) is not retried until it changes;
 * - `flush` keeps only uploads and state-only bookkeeping.
 */
export function planSync(input: PlanInput): SyncPlan {
  const { state, local, remote, deletions, phase, nowMs } = input;
  const deleteAfterMs = input.deleteAfterMs ?? 0;
  const at = nowMs !== undefined ? { atMs: nowMs } : {};
  const readOnly = state.access === 'read_only';
  const baselineSize = Object.keys(state.baseline).length;
  // A folder wiped whole is re-downloaded, never turned into mass remote deletes. "Whole" means
  // every file the last sync saw locally is gone at once: files already known missing (pending
  // delete, or a deletion reported as not synced) do not count, so a folder emptied one deletion
  // at a time is not mistaken for a wipe.
  const presentAtLastSync = Object.entries(state.baseline).filter(
    ([path, entry]) =>
      pathEntry(state.pendingDeletes, path)?.baseSha !== entry.sha && pathEntry(state.refused, path)?.fingerprint !== DELETED_FINGERPRINT,
  ).length;
  const wiped = presentAtLastSync > 1 && local.size === 0 && !Object.keys(state.baseline).some((p) => input.skipped?.(p) === true);

  const pathSet = new Set<string>([
    ...Object.keys(state.baseline),
    ...Object.keys(state.pendingDeletes),
    ...local.keys(),
    ...remote.keys(),
  ]);
  const paths = [...pathSet].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

  const actions: SyncAction[] = [];
  const deleteCandidates: DeleteCandidate[] = [];

  for (const path of paths) {
    const decided = decidePath(path);
    if (decided === 'delete-candidate') {
      // Placeholder, replaced once the per-sync cap is applied below.
      deleteCandidates.push({ index: actions.length, path, baseSha: remote.get(path)?.sha ?? '' });
      actions.push({ kind: 'noop', path });
    } else {
      actions.push(phase === 'flush' ? restrictToFlush(decided) : decided);
    }
  }

  function decidePath(path: string): SyncAction | 'delete-candidate' {
    const localEntry = local.get(path);
    const remoteEntry = remote.get(path);
    const recorded = pathEntry(state.baseline, path);

    // Shadowed paths (case collisions, names this filesystem cannot hold) are never synced.
    if (Object.hasOwn(state.shadowed, path)) return { kind: 'noop', path };
    // Present but unreadable here (FIFO, symlink, permission, path too long): not a deletion.
    if (localEntry === undefined && input.skipped?.(path) === true) return { kind: 'noop', path };

    // A key that is not a safe store-relative path never reaches a pull or an upload.
    const check = checkRelPath(path);
    if (!check.ok) {
      if (localEntry !== undefined && pathEntry(state.refused, path)?.fingerprint !== versionOf(localEntry)) {
        return { kind: 'refuse', path, reason: check.reason, fingerprint: versionOf(localEntry) };
      }
      return { kind: 'noop', path };
    }

    // A listed sha we sent ourselves (response lost) is our own write: it is the base.
    const sent = pathEntry(state.sentShas, path);
    const ownWrite = remoteEntry !== undefined && sent !== undefined && sent.includes(remoteEntry.sha);
    const base = ownWrite ? { id: remoteEntry.id, sha: remoteEntry.sha } : recorded;
    const baseClean =
      recorded !== undefined &&
      remoteEntry !== undefined &&
      recorded.id === remoteEntry.id &&
      recorded.sha === remoteEntry.sha &&
      sent === undefined &&
      !Object.hasOwn(state.refused, path);

    const facts: PathFacts = {
      path,
      base,
      baseClean,
      local: localEntry,
      remote: remoteEntry,
      refusedFingerprint: pathEntry(state.refused, path)?.fingerprint,
    };
    return decide(facts);
  }

  function decide(f: PathFacts): SyncAction | 'delete-candidate' {
    const { path, base, local: l, remote: r } = f;
    const key = presenceKey(base !== undefined, l !== undefined, r !== undefined);
    switch (key) {
      case '000':
        // Only a stale pending delete mentions this path: clear it.
        return { kind: 'noop', path };

      case '001': {
        // New in the store (or the folder was wiped): download it.
        const rr = r!;
        return { kind: 'pull', path, id: rr.id, sha: rr.sha, why: wiped ? 'redownload' : 'remote-new' };
      }

      case '010': {
        // New local file: upload it, unless refused already or the store is read-only.
        const ll = l!;
        const version = versionOf(ll);
        if (f.refusedFingerprint === version) return { kind: 'noop', path };
        if (ll.kind === 'unsyncable') return { kind: 'refuse', path, reason: ll.reason, fingerprint: version };
        if (readOnly) return { kind: 'refuse', path, reason: REFUSAL_READ_ONLY_EDIT, fingerprint: version };
        return { kind: 'push-create', path, sha: ll.sha };
      }

      case '011': {
        // Both sides created the path independently: same bytes → adopt; otherwise the store wins.
        const ll = l!;
        const rr = r!;
        if (ll.kind === 'file' && ll.sha === rr.sha) return { kind: 'adopt', path, id: rr.id, sha: rr.sha };
        return { kind: 'pull', path, id: rr.id, sha: rr.sha, why: 'conflict', ...localShaOf(ll) };
      }

      case '100':
        // Gone on both sides: forget it.
        return { kind: 'forget', path };

      case '101': {
        const bb = base!;
        const rr = r!;
        // Folder wiped whole: download again, never delete remotely.
        if (wiped) return { kind: 'pull', path, id: rr.id, sha: rr.sha, why: 'redownload' };
        // Deleted locally but changed in the store meanwhile: the store wins, the file comes back.
        if (rr.sha !== bb.sha || rr.id !== bb.id) return { kind: 'pull', path, id: rr.id, sha: rr.sha, why: 'restore' };
        // Missing since a tool call was stopped or timed out, which may have moved it away: put
        // back, never deleted (whatever the deletion mode).
        if (isMarkedForRestore(state, path)) return { kind: 'pull', path, id: rr.id, sha: rr.sha, why: 'put-back' };
        // A deletion already reported as not synced (read-only, log_only, disabled) stays as is.
        if (f.refusedFingerprint === DELETED_FINGERPRINT) return { kind: 'noop', path };
        // Read-only: never delete remotely; report once and leave the file missing.
        if (readOnly) return { kind: 'refuse', path, reason: REFUSAL_READ_ONLY_DELETE, fingerprint: DELETED_FINGERPRINT };
        // disabled: the memory stays; reported once, and the baseline is kept so the file is not
        // downloaded again.
        if (deletions === 'disabled') {
          return { kind: 'refuse', path, reason: REFUSAL_DELETIONS_DISABLED, fingerprint: DELETED_FINGERPRINT };
        }
        // A later sync than the one that first saw it missing confirms it, once the file has been
        // gone for deleteAfterMs (a file replaced by an editor or a checkout comes back meanwhile).
        // The final sync waives the wait: nothing will come back to confirm it.
        const pending = pathEntry(state.pendingDeletes, path);
        const seen = pending !== undefined && pending.baseSha === bb.sha;
        const goneLongEnough = seen && (pending.sinceMs === undefined || nowMs === undefined || nowMs - pending.sinceMs >= deleteAfterMs);
        const confirmed =
          phase === 'final'
            ? input.finalDeletes !== 'corroborated' || seen
            : seen && state.generation > pending.sinceGeneration && goneLongEnough;
        if (!confirmed) return { kind: 'await-delete', path, baseSha: bb.sha, capped: false, ...at };
        // log_only: say what would be deleted, delete nothing.
        if (deletions === 'log_only') return { kind: 'would-delete-remote', path, id: rr.id };
        return 'delete-candidate';
      }

      case '110': {
        // Deleted in the store.
        const bb = base!;
        const ll = l!;
        const version = versionOf(ll);
        // Unchanged locally: delete the local file too.
        if (ll.kind === 'file' && ll.sha === bb.sha) return { kind: 'delete-local', path, expectedLocalSha: ll.sha };
        if (f.refusedFingerprint === version) return { kind: 'noop', path };
        if (ll.kind === 'unsyncable') return { kind: 'refuse', path, reason: ll.reason, fingerprint: version };
        // Edited locally: re-create it from the file (writable); a read-only store follows the store.
        if (readOnly) return { kind: 'delete-local', path, expectedLocalSha: ll.sha };
        return { kind: 'push-create', path, sha: ll.sha };
      }

      case '111': {
        const bb = base!;
        const ll = l!;
        const rr = r!;
        // Same bytes on both sides: adopt, unless that is already the clean baseline.
        if (ll.kind === 'file' && ll.sha === rr.sha) {
          return f.baseClean ? { kind: 'noop', path } : { kind: 'adopt', path, id: rr.id, sha: rr.sha };
        }
        const localChanged = ll.kind === 'unsyncable' || ll.sha !== bb.sha;
        const remoteChanged = rr.sha !== bb.sha || rr.id !== bb.id;
        // Only the store changed: download.
        if (!localChanged) return { kind: 'pull', path, id: rr.id, sha: rr.sha, why: 'remote-changed', ...localShaOf(ll) };
        // Both changed to different bytes: the store wins; the executor keeps a conflict copy.
        if (remoteChanged) return { kind: 'pull', path, id: rr.id, sha: rr.sha, why: 'conflict', ...localShaOf(ll) };
        // Only the local file changed.
        const version = versionOf(ll);
        if (f.refusedFingerprint === version) return { kind: 'noop', path };
        if (ll.kind === 'unsyncable') return { kind: 'refuse', path, reason: ll.reason, fingerprint: version };
        if (readOnly) return { kind: 'refuse', path, reason: REFUSAL_READ_ONLY_EDIT, fingerprint: version };
        return { kind: 'push-update', path, id: rr.id, sha: ll.sha, expectedSha: rr.sha };
      }

      default:
        return assertNever(key);
    }
  }

  // Cap remote deletes per routine sync; the rest stay pending for the next sync (ascending path
  // order). The final sync is never capped: no later sync would carry out what it held back.
  const cap = phase === 'final' ? Number.POSITIVE_INFINITY : deleteCapFor(baselineSize);
  let deleteCapped = 0;
  deleteCandidates.forEach((candidate, n) => {
    const remoteEntry = remote.get(candidate.path)!;
    let action: SyncAction;
    if (n < cap) {
      action = { kind: 'delete-remote', path: candidate.path, id: remoteEntry.id, expectedSha: remoteEntry.sha };
    } else {
      deleteCapped++;
      action = { kind: 'await-delete', path: candidate.path, baseSha: candidate.baseSha, capped: true, ...at };
    }
    actions[candidate.index] = phase === 'flush' ? restrictToFlush(action) : action;
  });

  return { actions, wiped, deleteCapped };
}

/**
 * The `flush` phase pushes only: uploads and state-only bookkeeping pass through; pulls and
 * local deletes become noops; remote deletes stay pending (`await-delete`) for recovery.
 */
function restrictToFlush(action: SyncAction): SyncAction {
  switch (action.kind) {
    case 'push-create':
    case 'push-update':
    case 'adopt':
    case 'forget':
    case 'refuse':
    case 'noop':
    case 'await-delete':
      return action;
    case 'delete-remote':
      // Stays pending (a noop would clear it): a crash-recovery pass may still confirm it.
      return { kind: 'await-delete', path: action.path, baseSha: action.expectedSha, capped: false };
    case 'would-delete-remote':
    case 'pull':
    case 'delete-local':
      return { kind: 'noop', path: action.path };
    default:
      return assertNever(action);
  }
}
