import * as path from 'node:path';
import { StateFileError } from '../../errors.js';
import type { LocalDir } from './local-dir.js';
import { splitRelPath } from './local-dir.js';
import { ensureStateSubdir, safeSegment } from './state-dir.js';

/**
 * Copies of local bytes kept outside every mount, in the state folder:
 * - `conflicts/<storeId>/<stamp>/<path>`: when the store wins a conflict, the local bytes it
 *   overwrites are copied first, so nothing the agent wrote is lost;
 * - `unsaved/<storeId>/<stamp>/<path>`: at the end of a session, every file that differs from the
 *   store (cut off, failed, refused) is copied before its folder is removed.
 * Every folder on the way is created `0700` and checked not to be a symlink; the copy itself is
 * created with `O_EXCL`, so nothing is written through a symlink. The log line and the event name
 * the copy.
 */

export type CopyKind = 'conflicts' | 'unsaved';

/** A folder-safe timestamp (`2026-05-01T10-20-30-123Z`) naming one sync's copies. */
export function conflictStamp(date: Date = new Date()): string {
  return date.toISOString().replace(/[:.]/g, '-');
}

export class ConflictCopies {
  readonly #stateDir: string;

  constructor(stateDir: string) {
    this.#stateDir = path.resolve(stateDir);
  }

  /** The folder holding copies of `storeId` made in the sync stamped `stamp`. */
  folderFor(storeId: string, stamp: string, kind: CopyKind = 'conflicts'): string {
    return path.join(this.#stateDir, kind, safeSegment(storeId), stamp);
  }

  /**
   * Copy the local file `rel` of `dir` out of the mount. Returns the copy's absolute path.
   * If a copy with that name exists already (two copies of one path in one sync), a numeric
   * suffix keeps both.
   */
  async save(dir: LocalDir, storeId: string, rel: string, stamp: string, kind: CopyKind = 'conflicts'): Promise<string> {
    const segments = splitRelPath(rel);
    const folder = await ensureStateSubdir(this.#stateDir, [kind, safeSegment(storeId), safeSegment(stamp), ...segments.slice(0, -1)]);
    const base = path.join(folder, segments[segments.length - 1]!);
    for (let n = 0; n < 100; n++) {
      const dest = n === 0 ? base : `${base}.${n}`;
      try {
        await dir.copyOut(rel, dest);
        return dest;
      } catch (e) {
        if ((e as { code?: unknown }).code === 'EEXIST') continue;
        throw e;
      }
    }
    throw new StateFileError(`too many copies of ${rel} in ${folder}; remove the old ones`, { path: folder });
  }
}
