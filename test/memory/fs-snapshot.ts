/**
 * Snapshots of a folder tree for "nothing outside the mount changed" assertions: every entry
 * below a folder (symlinks not followed) with its kind, mode and content hash, optionally leaving
 * some sub-trees out (the mount root, the state folder).
 */
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';

export type TreeSnapshot = Record<string, string>;

export async function snapshotTree(root: string, exclude: readonly string[] = []): Promise<TreeSnapshot> {
  const out: TreeSnapshot = {};
  const skip = new Set(exclude.map((p) => path.resolve(p)));
  async function walk(dir: string): Promise<void> {
    let names: string[];
    try {
      names = await fsp.readdir(dir);
    } catch {
      return;
    }
    for (const name of names.sort()) {
      const abs = path.join(dir, name);
      if (skip.has(abs)) continue;
      const rel = path.relative(root, abs);
      const st = await fsp.lstat(abs).catch(() => undefined);
      if (st === undefined) continue;
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isSymbolicLink()) out[rel] = `link ${await fsp.readlink(abs)}`;
      else if (st.isDirectory()) {
        out[rel] = `dir ${mode}`;
        await walk(abs);
      } else if (st.isFile()) {
        const bytes = await fsp.readFile(abs);
        out[rel] = `file ${mode} ${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}`;
      } else out[rel] = `special ${mode}`;
    }
  }
  await walk(root);
  return out;
}
