/**
 * Pins the bytes a scan keeps for the uploads after it: every UTF-8 file the scan had to read is
 * kept with exactly the bytes that were hashed, within a byte budget; files answered by the stat
 * cache, files over the budget and non-UTF-8 files are not kept (an upload then reads the file).
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalDir } from '../../../src/memory/disk/local-dir.js';
import { scanLocal, sha256Hex } from '../../../src/memory/disk/local-scan.js';
import { StatCache } from '../../../src/memory/disk/stat-cache.js';

describe('scanLocal contents', () => {
  let root: string;
  let dir: LocalDir;
  beforeEach(async () => {
    root = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-scan-contents-'));
    dir = new LocalDir(root);
  });
  afterEach(async () => fsp.rm(root, { recursive: true, force: true }));

  it('keeps the bytes of every file it read, and they hash to the scanned sha', async () => {
    await fsp.mkdir(path.join(root, 'notes'));
    await fsp.writeFile(path.join(root, 'a.md'), 'alpha');
    await fsp.writeFile(path.join(root, 'notes', 'b.md'), 'beta\n');

    const scan = await scanLocal(dir, new StatCache());

    expect(Object.fromEntries([...scan.contents].map(([rel, b]) => [rel, b.toString('utf8')]))).toEqual({
      'a.md': 'alpha',
      'notes/b.md': 'beta\n',
    });
    for (const [rel, bytes] of scan.contents) expect(scan.entries.get(rel)).toMatchObject({ kind: 'file', sha: sha256Hex(bytes) });
  });

  it('keeps nothing for files the stat cache answered', async () => {
    await dir.writeFileAtomic('old.md', Buffer.from('settled'), { mtimeMs: Date.now() - 60_000 });
    const cache = new StatCache();
    await scanLocal(dir, cache);

    const second = await scanLocal(dir, cache);

    expect(second.filesRead).toBe(0);
    expect(second.contents.size).toBe(0);
  });

  it('stops keeping at the byte budget and never keeps non-UTF-8 bytes', async () => {
    await fsp.writeFile(path.join(root, 'a.md'), 'x'.repeat(600));
    await fsp.writeFile(path.join(root, 'b.md'), 'y'.repeat(600));
    await fsp.writeFile(path.join(root, 'bin.dat'), Buffer.from([0xff, 0xfe, 0x00]));

    const scan = await scanLocal(dir, new StatCache(), { keptBytesBudget: 1000 });

    expect(scan.filesRead).toBe(3);
    expect(scan.contents.size).toBe(1);
    expect(scan.contents.has('bin.dat')).toBe(false);
  });
});
