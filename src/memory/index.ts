/** The memory core: mount a session's stores as folders and keep them in sync. */
export { MemoryMounter, MAX_STORES_PER_SESSION, type MemoryMounterOptions } from './mount/mounter.js';
export type { MountedSession, MountedStore } from './sync/mounted.js';
export {
  SyncLoop,
  SYNC_INTERVAL_DEFAULT_MS,
  SYNC_INTERVAL_MIN_MS,
  FINAL_FLUSH_DEFAULT_MS,
  type SyncLoopOptions,
  type FinishReport,
} from './sync/sync-loop.js';
export { defaultStateDir } from './disk/state-dir.js';
export type {
  BaselineEntry,
  MemoryAccess,
  MemoryDeleteMode,
  MemoryEventMap,
  StoreSyncState,
  SyncReport,
} from './rules/types.js';
