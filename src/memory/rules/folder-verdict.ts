/**
 * What a sync does with a store's folder, decided from what was observed there. Pure: the sync
 * loop reads the folder and its marker, and this decides. The marker part is the rule of
 * `marker.ts`, which the mounter applies too, so a folder the mounter calls ours is one the sync
 * loop syncs.
 */

import { MARKER_FILE_NAME, type MarkerVerdict } from './marker.js';
import type { SyncPhase } from './plan.js';

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
  { action: 'sync' } | { action: 'rebuild'; createRoot: boolean; warning: string } | { action: 'skip'; problem?: string };

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
