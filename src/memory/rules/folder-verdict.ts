/**
 * Whether a mount folder still belongs to its store, decided from what was observed there. Pure:
 * the mounter and the sync loop read the folder and its marker, and these functions decide. The
 * same marker rule serves both, so a folder the mounter calls ours is one the sync loop syncs.
 */

import { MARKER_FILE_NAME, isValidMarker, markerContent, parseMarker } from './marker.js';
import type { SyncPhase } from './plan.js';

/** What was found where the marker goes. */
export type MarkerRead =
  | { kind: 'missing' }
  /** A folder, symlink or FIFO where the marker goes: an altered marker, never one to write over. */
  | { kind: 'not-a-file' }
  | { kind: 'bytes'; bytes: Uint8Array };

/**
 * What the marker says about the folder:
 * - `ours`: exactly the marker of this store;
 * - `other-store`: a well-formed marker of another store;
 * - `missing`, `not-a-file`, `malformed`: no usable marker.
 */
export type MarkerVerdict =
  | { kind: 'ours' }
  | { kind: 'other-store'; storeId: string }
  | { kind: 'missing' }
  | { kind: 'not-a-file' }
  | { kind: 'malformed' };

export function markerVerdict(read: MarkerRead, storeId: string): MarkerVerdict {
  switch (read.kind) {
    case 'missing':
    case 'not-a-file':
      return { kind: read.kind };
    case 'bytes': {
      if (isValidMarker(read.bytes, storeId)) return { kind: 'ours' };
      const parsed = parseMarker(read.bytes);
      if (parsed !== undefined && parsed.storeId !== storeId) return { kind: 'other-store', storeId: parsed.storeId };
      return { kind: 'malformed' };
    }
    default:
      return read satisfies never;
  }
}

/** What a sync found at a store's mount path. `empty`: nothing in it but the marker and our temp files. */
export type FolderFacts =
  | { root: 'missing' }
  /** Something else than a real folder is there (a file, a symlink). */
  | { root: 'not-a-folder' }
  | { root: 'folder'; marker: MarkerVerdict; empty: boolean };

/**
 * What the sync does with the folder:
 * - `sync`: the folder is bound to this store;
 * - `rebuild`: the folder was wiped whole (removed, or emptied marker included); write the marker
 *   (and create the folder first when `createRoot`), then download the store again;
 * - `skip`: sync nothing this time; `problem`, when set, is warned about once until it changes.
 */
export type FolderVerdict =
  | { action: 'sync' }
  | { action: 'rebuild'; createRoot: boolean; warning: string }
  | { action: 'skip'; problem?: string };

/**
 * The folder rule of a sync. A folder wiped whole is rebuilt and downloaded again (except by the
 * push-only flush, which skips it); a folder whose marker is missing, altered or another store's
 * while it holds files is skipped with a problem: nothing is uploaded or deleted from it.
 */
export function folderVerdict(facts: FolderFacts, root: string, phase: SyncPhase): FolderVerdict {
  switch (facts.root) {
    case 'not-a-folder':
      return { action: 'skip', problem: `${root} is no longer a real folder` };
    case 'missing':
      if (phase === 'flush') return { action: 'skip' };
      return { action: 'rebuild', createRoot: true, warning: 'the store folder was removed; re-created and downloading again' };
    case 'folder':
      break;
    default:
      return facts satisfies never;
  }
  const { marker } = facts;
  if (marker.kind === 'ours') return { action: 'sync' };
  if (marker.kind === 'not-a-file') return { action: 'skip', problem: `marker ${MARKER_FILE_NAME} is altered (not a regular file)` };
  if (facts.empty) {
    if (phase === 'flush') return { action: 'skip' };
    return { action: 'rebuild', createRoot: false, warning: 'the store folder was emptied, marker included; downloading again' };
  }
  return { action: 'skip', problem: `marker ${MARKER_FILE_NAME} is ${marker.kind === 'missing' ? 'missing' : 'altered'}` };
}

/** The warning for a skipped folder: what is wrong, what is not done, and the fix. */
export function markerProblemWarning(problem: string, storeId: string): string {
  return `${problem}; this folder is not synced (nothing uploaded, nothing deleted) until the marker holds ${JSON.stringify(markerContent(storeId))} again`;
}

/** The problem of a marker that went away between the scan and the uploads. */
export const MARKER_CHANGED_DURING_SYNC = `marker ${MARKER_FILE_NAME} vanished or changed during the sync`;
