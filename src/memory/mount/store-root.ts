import * as path from 'node:path';
import { MemoryMountError } from '../../errors.js';
import { checkMountPath } from '../rules/paths.js';

/** What a session's `memory_store` resource says about where it goes. */
export interface StoreRootInput {
  memory_store_id: string;
  mount_path?: string | null | undefined;
  name?: string | null | undefined;
}

/**
 * The folder a store is mounted at: its clean absolute `mount_path`, or
 * `<workdir>/memory/<slug of its name>` when the session gives none. The mounter and the per-path
 * locks both key on this. Throws a {@link MemoryMountError} for a mount path that is not clean.
 */
export function storeRoot(r: StoreRootInput, workdir: string): string {
  const name = r.name || r.memory_store_id;
  if (r.mount_path) {
    const check = checkMountPath(r.mount_path);
    if (!check.ok) {
      throw new MemoryMountError(
        `memory store ${r.memory_store_id} (${name}): ${check.reason}; the worker mounts only clean absolute paths ` +
          '(no "..", ".", empty segments, NUL or control characters). Attach the store at a clean absolute mount_path.',
        { storeId: r.memory_store_id, path: r.mount_path },
      );
    }
    return check.path;
  }
  return path.join(path.resolve(workdir), 'memory', slug(name) || slug(r.memory_store_id) || 'store');
}

/** `User Preferences` → `user-preferences`, as the API derives mount paths. */
export function slug(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}
