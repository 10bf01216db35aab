/**
 * The memory core: mount a session's stores as folders and keep them in sync. The public barrel
 * the rest of src/ imports. Its rooms, each importing only the ones before it (checked by
 * .dependency-cruiser.cjs; each room's index.ts says what lives there):
 *   rules/    pure decisions: plan, sync state, marker, verdicts, paths, shared types
 *   disk/     the store folder: pinned folders, writes, scans, stat cache, state folder
 *   remote/   the store's listings and memory requests
 *   journal/  the crash journal and its owner process
 *   sync/     one store's sync and the loop over a session's stores
 *   mount/    the mount, and the leftovers of dead workers
 */
export { MemoryMounter, MAX_STORES_PER_SESSION, type MemoryMounterOptions } from './mount/mounter.js';
export type { MountedSession, MountedStore } from './sync/mounted.js';
export { SyncLoop, FINAL_FLUSH_DEFAULT_MS, type SyncLoopOptions, type FinishReport } from './sync/sync-loop.js';
export { defaultStateDir } from './disk/state-dir.js';
export type { BaselineEntry, MemoryAccess, MemoryDeleteMode, MemoryEventMap, StoreSyncState, SyncReport } from './rules/types.js';
