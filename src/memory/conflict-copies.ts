import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type { LocalDir } from './local-dir.js';

/**
 * Conflict copies: when the store wins a conflict (M15), the local bytes it overwrites are first
 * copied to `<stateDir>/conflicts/<storeId>/<timestamp>/<path>`, outside every mount, so nothing
 * the agent wrote is lost. The warning and the `conflict` event name the copy.
 */

/**
 * Default state directory: `<os.tmpdir()>/managed-agents-worker`. Temp folders may be wiped on
 * reboot; production deployments should pass a persistent `stateDir`.
 */
export function defaultStateDir(): string {
  return path.join(os.tmpdir(), 'managed-agents-worker');
}

/** A folder-safe timestamp (`2026-05-01T10-20-30-123Z`) naming one sync's conflict copies. */
export function conflictStamp(date: Date = new Date()): string {
  return date.toISOString().replace(/[:.]/g, '-');
}

export class ConflictCopies {
  readonly #stateDir: string;

  constructor(stateDir: string) {
    this.#stateDir = path.resolve(stateDir);
  }

  /** The folder holding conflict copies of `storeId` made in the sync stamped `stamp`. */
  folderFor(storeId: string, stamp: string): string {
    return path.join(this.#stateDir, 'conflicts', safeSegment(storeId), stamp);
  }

  /**
   * Copy the local file `rel` of `dir` out of the mount. Returns the copy's absolute path.
   * If a copy with that name exists already (two conflicts on one path in one sync), a numeric
   * suffix keeps both.
   */
  async save(dir: LocalDir, storeId: string, rel: string, stamp: string): Promise<string> {
    const base = path.join(this.folderFor(storeId, stamp), ...rel.split('/'));
    await fsp.mkdir(path.dirname(base), { recursive: true, mode: 0o700 });
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
    throw new Error(`too many conflict copies of ${rel} in ${path.dirname(base)}`);
  }
}

function safeSegment(s: string): string {
  const cleaned = s.replace(/[^A-Za-z0-9_.-]/g, '_');
  return cleaned === '' || cleaned === '.' || cleaned === '..' ? '_' : cleaned;
}
