/**
 * Pins the stat cache: a file whose (inode, size, mtime, ctime) is unchanged and whose mtime
 * is safely older than the moment it was hashed is answered without reading it; any stat change,
 * or an mtime too close to the hash moment (git's racy-timestamp guard: 1 s, or 100 ms for an
 * mtime with sub-millisecond digits), forces a re-read. Also
 * pins that the scan reads no content on an idle pass and never reads an oversized file.
 */
import type { BigIntStats } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalDir } from '../../../src/memory/disk/local-dir.js';
import { scanLocal } from '../../../src/memory/disk/local-scan.js';
import { StatCache } from '../../../src/memory/disk/stat-cache.js';

const SEC = 1_000_000_000n;

function fakeStat(fields: { ino?: bigint; size?: bigint; mtimeNs: bigint; ctimeNs?: bigint }): BigIntStats {
  return {
    ino: fields.ino ?? 7n,
    size: fields.size ?? 10n,
    mtimeNs: fields.mtimeNs,
    ctimeNs: fields.ctimeNs ?? fields.mtimeNs,
  } as unknown as BigIntStats;
}

describe('StatCache lookups', () => {
  const hashedAt = 1_000n * SEC;
  const base = { mtimeNs: hashedAt - 5n * SEC };
  it.each([
    { description: 'an identical stat, mtime well before the hash moment', stat: fakeStat(base), hit: true },
    { description: 'another inode', stat: fakeStat({ ...base, ino: 8n }), hit: false },
    { description: 'another size', stat: fakeStat({ ...base, size: 11n }), hit: false },
    { description: 'another mtime', stat: fakeStat({ mtimeNs: base.mtimeNs + 1n, ctimeNs: base.mtimeNs }), hit: false },
    { description: 'another ctime', stat: fakeStat({ ...base, ctimeNs: base.mtimeNs + 1n }), hit: false },
  ])('$description → hit: $hit', ({ stat, hit }) => {
    const cache = new StatCache();
    cache.record('a.md', fakeStat(base), 'sha-a', true, hashedAt);
    expect(cache.lookup('a.md', stat)?.sha).toBe(hit ? 'sha-a' : undefined);
  });

  it.each([
    { description: 'mtime in the same instant as the hash', mtimeNs: hashedAt, hit: false },
    { description: 'mtime half a second before the hash', mtimeNs: hashedAt - SEC / 2n, hit: false },
    { description: 'mtime after the hash (clock step)', mtimeNs: hashedAt + SEC, hit: false },
    { description: 'mtime just over the slack before the hash', mtimeNs: hashedAt - SEC - 1_000_000n, hit: true },
    { description: 'fine mtime (sub-ms digits) in the same tick as the hash', mtimeNs: hashedAt - 4_000_001n, hit: false },
    { description: 'fine mtime just inside the 100 ms fine slack', mtimeNs: hashedAt - 99_999_999n, hit: false },
    { description: 'fine mtime just over the 100 ms fine slack', mtimeNs: hashedAt - 100_000_001n, hit: true },
    { description: 'fine mtime after the hash (clock step)', mtimeNs: hashedAt + 1n, hit: false },
    { description: 'whole-ms mtime 200 ms before the hash keeps the 1 s slack', mtimeNs: hashedAt - 200_000_000n, hit: false },
  ])('racy guard: $description → hit: $hit', ({ mtimeNs, hit }) => {
    const cache = new StatCache();
    const st = fakeStat({ mtimeNs });
    cache.record('a.md', st, 'sha-a', true, hashedAt);
    expect(cache.lookup('a.md', st) !== undefined).toBe(hit);
  });
});

describe('scanLocal with the cache', () => {
  let tmp: string;
  let dir: LocalDir;
  beforeEach(async () => {
    tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-statcache-'));
    dir = new LocalDir(tmp);
  });
  afterEach(async () => {
    await fsp.rm(tmp, { recursive: true, force: true });
  });

  it('reads nothing on a second pass over files written by the sync itself (backdated)', async () => {
    const cache = new StatCache();
    for (let i = 0; i < 20; i++) {
      const st = await dir.writeFileAtomic(`n/${i}.md`, Buffer.from(`memory ${i}`), { mtimeMs: Date.now() - 10_000 });
      cache.record(`n/${i}.md`, st, 'x', true, cache.nowNs());
    }
    const first = await scanLocal(dir, cache);
    expect(first.filesRead).toBe(0);
    expect(first.entries.size).toBe(20);
  });

  it('re-reads a freshly edited file once, then trusts it when it is old enough', async () => {
    let nowNs = BigInt(Date.now()) * 1_000_000n;
    const cache = new StatCache({ nowNs: () => nowNs });
    await fsp.writeFile(path.join(tmp, 'a.md'), 'agent edit');
    const first = await scanLocal(dir, cache);
    expect(first.filesRead).toBe(1);
    const second = await scanLocal(dir, cache);
    expect(second.filesRead).toBe(1); // racy: hashed within the slack of its mtime
    nowNs += 5n * SEC;
    const third = await scanLocal(dir, cache);
    expect(third.filesRead).toBe(1); // re-hashed now that it is old enough …
    const fourth = await scanLocal(dir, cache);
    expect(fourth.filesRead).toBe(0); // … and trusted from then on
  });

  it('detects a same-size edit made after the hash', async () => {
    const cache = new StatCache();
    const st = await dir.writeFileAtomic('a.md', Buffer.from('aaaa'), { mtimeMs: Date.now() - 10_000 });
    cache.record('a.md', st, 'old-sha', true, cache.nowNs());
    await fsp.writeFile(path.join(tmp, 'a.md'), 'bbbb');
    const scan = await scanLocal(dir, cache);
    expect(scan.filesRead).toBe(1);
    expect(scan.entries.get('a.md')).toMatchObject({ kind: 'file', size: 4 });
    expect(scan.entries.get('a.md')).not.toMatchObject({ sha: 'old-sha' });
  });

  it('reports an oversized file as unsyncable without reading it, and binary bytes as not UTF-8', async () => {
    await fsp.writeFile(path.join(tmp, 'big.md'), Buffer.alloc(150_000, 0x61));
    await fsp.writeFile(path.join(tmp, 'bin.dat'), Buffer.from([0xff, 0xfe, 0x00, 0x80]));
    const scan = await scanLocal(dir, new StatCache());
    expect(scan.filesRead).toBe(1);
    expect(scan.entries.get('big.md')).toMatchObject({ kind: 'unsyncable' });
    expect(scan.entries.get('bin.dat')).toMatchObject({ kind: 'unsyncable', reason: expect.stringContaining('UTF-8') });
  });
});
