/**
 * Pins what a scan keeps per file: the identity the sync compares (inode, size, mtime and ctime in
 * nanoseconds, as the lstat gave them, to the nanosecond) in a record of its own, not the lstat
 * object; and when two records name the same file version (any field differing, by one nanosecond
 * even, makes another version).
 */
import { lstatSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalDir } from '../../../src/memory/disk/local-dir.js';
import { scanLocal } from '../../../src/memory/disk/local-scan.js';
import { fileStatOf, sameFileStat, type FileStat } from '../../../src/memory/rules/file-stat.js';
import { StatCache } from '../../../src/memory/disk/stat-cache.js';

describe('scan records', () => {
  let root: string;
  beforeEach(async () => {
    root = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-scan-records-'));
  });
  afterEach(async () => fsp.rm(root, { recursive: true, force: true }));

  it('keeps per file the four fields the sync compares, to the nanosecond, and not the lstat', async () => {
    await fsp.mkdir(path.join(root, 'notes'));
    await fsp.writeFile(path.join(root, 'notes', 'a.md'), 'alpha');
    const dir = new LocalDir(root);
    const cache = new StatCache();

    for (const pass of ['read', 'cached']) {
      const scan = await scanLocal(dir, cache);
      const kept = scan.stats.get('notes/a.md');
      const st = lstatSync(path.join(root, 'notes', 'a.md'), { bigint: true });
      expect(kept, pass).toStrictEqual({ ino: st.ino, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs });
      expect(Object.getPrototypeOf(kept), pass).toBe(Object.prototype);
    }
  });
});

describe('sameFileStat', () => {
  const base: FileStat = { ino: 7n, size: 5n, mtimeNs: 1_700_000_000_123_456_789n, ctimeNs: 1_700_000_000_123_456_789n };
  const rows: Array<{ description: string; other: FileStat | undefined; same: boolean }> = [
    { description: 'the same four fields are the same version', other: { ...base }, same: true },
    { description: 'an mtime one nanosecond later is another version', other: { ...base, mtimeNs: base.mtimeNs + 1n }, same: false },
    { description: 'a ctime one nanosecond later is another version', other: { ...base, ctimeNs: base.ctimeNs + 1n }, same: false },
    { description: 'another inode is another version', other: { ...base, ino: 8n }, same: false },
    { description: 'another size is another version', other: { ...base, size: 6n }, same: false },
    { description: 'no record is never the same version', other: undefined, same: false },
  ];
  for (const row of rows) {
    it(row.description, () => {
      expect(sameFileStat(base, row.other)).toBe(row.same);
    });
  }

  it('fileStatOf copies exactly the compared fields', () => {
    const st = lstatSync(os.tmpdir(), { bigint: true });
    expect(fileStatOf(st)).toStrictEqual({ ino: st.ino, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs });
  });
});
