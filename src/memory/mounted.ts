import type { MemoryAccess, StoreSyncState } from './types.js';

/** One store of a mounted session. */
export interface MountedStore {
  storeId: string;
  /** The store's name as the session snapshotted it (the id when the session gives none). */
  name: string;
  /** Absolute path of the store's folder. */
  root: string;
  access: MemoryAccess;
  /** Sync state after the download (baseline of every materialised memory). The SyncLoop advances its own copy. */
  state: StoreSyncState;
  /** Memories materialised by the download. */
  memories: number;
}

/** The handle a mount returns. */
export interface MountedSession {
  sessionId: string;
  stores: MountedStore[];
  /** Every store folder, read-write and read-only alike (what the file tools may open). */
  roots: string[];
  /** Folders of read-only stores (the write/edit tools refuse them, M14). */
  readOnlyRoots: string[];
  /**
   * Remove the folders this mount created. A folder whose marker is missing or altered but still
   * holds files is kept, with a warning. Idempotent; after it, nothing touches the folders.
   */
  unmount(): Promise<void>;
}
