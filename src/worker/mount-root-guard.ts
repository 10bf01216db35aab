import * as path from 'node:path';
import { MemoryMountError } from '../errors.js';
import { storeRoot, type StoreRootInput } from '../memory/mount/store-root.js';
import { stateDirOverlap } from './state-dir-outside.js';

/**
 * A store's folder is a view its session's agent writes in, so it must not lie where the worker
 * keeps what is not that session's: inside the state folder (the agent would write next to the
 * journal, the content cache of every store and other sessions' copies, or in a folder the cache
 * writes into later), nor under `<workdir>/sessions/` (the tool folders of other sessions: the
 * store would be mounted in another session's folder, or become its folder and sync its files).
 * A mount path is the session's to choose, so it is checked for every session, before any path
 * is locked or created. Throws a {@link MemoryMountError} naming the store, the path and the fix.
 */
export function assertMountRootsOutsideWorkerFolders(
  resources: readonly StoreRootInput[],
  folders: { workdir: string; stateDir: string },
): void {
  const sessions = path.join(path.resolve(folders.workdir), 'sessions');
  for (const r of resources) {
    const root = storeRoot(r, folders.workdir);
    const who = `memory store ${r.memory_store_id}${r.name ? ` (${r.name})` : ''}`;
    const overlap = stateDirOverlap(folders.stateDir, root);
    if (overlap !== undefined) {
      throw new MemoryMountError(
        `${who}: its mount path ${root} ${overlap === 'folder-inside' ? 'is inside' : 'holds'} the worker's state folder ` +
          `${folders.stateDir}; the agent would write among the journal and other stores' contents. Attach the store at a ` +
          'mount_path outside the state folder, or set allowedMountRoots (--allowed-mount-root) to where stores belong.',
        { storeId: r.memory_store_id, path: root },
      );
    }
    if (stateDirOverlap(sessions, root) !== undefined) {
      throw new MemoryMountError(
        `${who}: its mount path ${root} is inside ${sessions}, where each session's tool folder lives; the store would ` +
          "be mounted in another session's folder. Attach the store at a mount_path outside the worker's workdir/sessions, " +
          'or set allowedMountRoots (--allowed-mount-root) to where stores belong.',
        { storeId: r.memory_store_id, path: root },
      );
    }
  }
}
