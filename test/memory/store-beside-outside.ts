/**
 * A temp folder holding a store folder and, beside it, a folder outside the store: the place a
 * symlink planted in the store would lead to. Tests of the folder layer check nothing there changes.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';

export interface StoreBesideOutside {
  tmp: string;
  root: string;
  outside: string;
}

export async function storeBesideOutside(prefix: string, storeFolders: string[] = []): Promise<StoreBesideOutside> {
  const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), prefix));
  const root = path.join(tmp, 'store');
  const outside = path.join(tmp, 'outside');
  await fsp.mkdir(root);
  for (const folder of storeFolders) await fsp.mkdir(path.join(root, folder), { recursive: true });
  await fsp.mkdir(outside);
  return { tmp, root, outside };
}
