/**
 * disk/: the local side. Hardened access to a store folder (folders pinned by descriptor, writes
 * that never follow a symlink, the fresh-file writer of a download), the scan that turns a folder
 * into the planner's input, the stat cache that spares unchanged files a read, the state folder
 * and what is kept there: conflict and unsaved copies, and the verified content cache.
 *
 * Imports: rules/, src/internal/, src/errors.ts and node:*. Checked by .dependency-cruiser.cjs.
 */
export {};
