/**
 * The sync decision function (requirements M7, M13, M14, M15; X4–X6). Pure: it sees the sync
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
 *   `would-delete-remote`) with `{ ok: true }`; a `noop` clears a stale pending delete;
 * - fetch content only for `pull` ({@link needsRemoteContent}) and read local bytes only for
 *   `push-create`/`push-update` and for the conflict copy of a `pull` with `why: 'conflict'`
 *   ({@link needsLocalContent});
 * - for a `pull` with `why: 'conflict'`, copy the current local file out of the mount first;
 * - for `delete-local`, delete only if the file still holds `expectedLocalSha` (else report a
 *   `precondition` failure);
 * - for push actions, upload exactly the bytes whose sha the plan names; if the file changed
 *   since the scan, skip the upload (`transient`) so the next sync sees the new version.
 */

import type { MemoryDeleteMode, StoreSyncState } from './types.js';

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
  /** What a local deletion may do on the server (M13). */
  deletions: MemoryDeleteMode;
  phase: SyncPhase;
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
  /** True when the whole folder was found wiped: everything is pulled again and nothing is deleted. */
  wiped: boolean;
  /** Remote deletes confirmed but held back by the per-sync cap (they stay pending). */
  deleteCapped: number;
}

/**
 * Fingerprint of "the file is missing locally", used in `state.refused` when a local deletion
 * is deliberately not synced (read-only store, `log_only` after it was logged once).
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

/** Compile-time exhaustiveness check. */
export function assertNever(value: never): never {
  throw new Error(`unhandled case: ${JSON.stringify(value)}`);
}

/**
 * Decide what one sync of one store does. Pure and deterministic: the same input gives the same
 * plan, with actions in ascending path order.
 */
export function planSync(input: PlanInput): SyncPlan {
  void input;
  return { actions: [], wiped: false, deleteCapped: 0 };
}
