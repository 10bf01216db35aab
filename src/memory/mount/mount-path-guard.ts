import * as fsp from 'node:fs/promises';
import * as path from 'node:path';

/**
 * Where a store may be mounted, beyond the shape of its path:
 * - no folder of the path's existing parent chain may be a symlink (the store would land wherever
 *   the link points, and whoever can change the link chooses where the worker writes);
 * - with allowed mount roots configured, the path must lie strictly inside one of them.
 */

/** Clean absolute spellings of the allowed roots (trailing slashes dropped, `..` resolved). */
export function normalizeAllowedRoots(roots: readonly string[]): string[] {
  return roots.map((r) => path.resolve(r));
}

/** True when `mountPath` lies strictly inside one of `roots`; an empty list allows every path. */
export function isInsideAllowedRoots(mountPath: string, roots: readonly string[]): boolean {
  if (roots.length === 0) return true;
  const target = path.resolve(mountPath);
  return roots.some((root) => target.startsWith(root === '/' ? '/' : `${root}/`) && target !== root);
}

/** A symlink found on the way to a mount path. */
export interface ParentSymlink {
  /** The folder of the chain that is a symlink. */
  link: string;
  /** What it points to (as stored in the link), for the message. */
  target: string;
}

/**
 * The first symlink among the existing folders of `mountPath`'s parent chain (`/`, `/a`, `/a/b`
 * for `/a/b/store`), or undefined. Folders that do not exist end the walk (the parent check
 * reports them).
 */
export async function findParentSymlink(mountPath: string): Promise<ParentSymlink | undefined> {
  const segments = path
    .resolve(mountPath)
    .split('/')
    .filter((s) => s !== '');
  let current = '';
  for (const segment of segments.slice(0, -1)) {
    current = `${current}/${segment}`;
    const st = await fsp.lstat(current).catch(() => undefined);
    if (st === undefined) return undefined;
    if (st.isSymbolicLink()) {
      const target = await fsp.readlink(current).catch(() => '?');
      return { link: current, target };
    }
  }
  return undefined;
}
