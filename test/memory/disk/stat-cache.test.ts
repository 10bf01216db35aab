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

describe('StatCache: files a mount wrote without a stat (expect), checked at their first lookup', () => {
  const now = 1_000n * SEC;
  const mtimeMs = Number(now / 1_000_000n) - 5_000;
  const mtimeNs = BigInt(mtimeMs) * 1_000_000n;
  const bound = now + 3_000_000n; // the batch's bound: its last file's ctime
  const written = { size: 10n, mtimeNs, ctimeNs: now };
  const noted = (opts: { offset?: () => number } = {}): StatCache => {
    const cache = new StatCache({ nowNs: () => now, clockOffsetMs: opts.offset ?? (() => 0) });
    cache.expect('a.md', 10, mtimeMs, 'sha-a', true);
    cache.settleWritten(bound);
    return cache;
  };
  it.each([
    { description: 'the stat as written', stat: written, hit: true },
    {
      description: 'an mtime a few ns off the ms set (the kernel rounds the seconds given)',
      stat: { ...written, mtimeNs: mtimeNs - 5n },
      hit: true,
    },
    { description: 'a ctime at the bound', stat: { ...written, ctimeNs: bound }, hit: true },
    { description: 'another size', stat: { ...written, size: 11n }, hit: false },
    { description: 'an mtime one ms later (touched to another time)', stat: { ...written, mtimeNs: mtimeNs + 1_000_000n }, hit: false },
    { description: 'an mtime of now (written again)', stat: { ...written, mtimeNs: now + 7n * SEC, ctimeNs: now + 7n * SEC }, hit: false },
    {
      description: 'mtime and size restored, ctime past the bound (edited then touched back)',
      stat: { ...written, ctimeNs: bound + 1n },
      hit: false,
    },
  ])('$description → hit: $hit', ({ stat, hit }) => {
    expect(noted().lookup('a.md', fakeStat({ ino: 7n, ...stat }))?.sha).toBe(hit ? 'sha-a' : undefined);
  });

  it.each([
    { description: 'no bound yet (its batch not settled)', settle: false, boundNs: undefined },
    { description: 'a batch whose bound could not be read', settle: true, boundNs: undefined },
  ])('reads a file noted with $description', ({ settle, boundNs }) => {
    const cache = new StatCache({ nowNs: () => now, clockOffsetMs: () => 0 });
    cache.expect('a.md', 10, mtimeMs, 'sha-a', true);
    if (settle) cache.settleWritten(boundNs);
    expect(cache.lookup('a.md', fakeStat({ ino: 7n, ...written }))).toBeUndefined();
  });

  it('settles only the files noted since the last settle', () => {
    const cache = new StatCache({ nowNs: () => now, clockOffsetMs: () => 0 });
    cache.expect('a.md', 10, mtimeMs, 'sha-a', true);
    cache.settleWritten(now);
    cache.expect('b.md', 10, mtimeMs, 'sha-b', true);
    cache.settleWritten(bound);
    // a.md's bound is its own batch's: a ctime after it is a change.
    expect(cache.lookup('a.md', fakeStat({ ino: 7n, ...written, ctimeNs: now + 1n }))).toBeUndefined();
    expect(cache.lookup('b.md', fakeStat({ ino: 8n, ...written, ctimeNs: now + 1n }))?.sha).toBe('sha-b');
  });

  it.each([
    { description: 'the wall clock unchanged against the monotonic one', offsetMs: 0, hit: true },
    { description: 'a drift of a few ms', offsetMs: -4, hit: true },
    { description: 'the wall clock stepped forward', offsetMs: 60_000, hit: true },
    { description: 'the wall clock stepped back 10 s', offsetMs: -10_000, hit: false },
  ])('$description since the writes → hit: $hit', ({ offsetMs, hit }) => {
    let offset = 0;
    const cache = noted({ offset: () => offset });
    offset = offsetMs;
    expect(cache.lookup('a.md', fakeStat({ ino: 7n, ...written })) !== undefined).toBe(hit);
  });

  it('keeps the first stat as the entry: the same stat hits again, another inode or ctime misses', () => {
    const cache = noted();
    expect(cache.lookup('a.md', fakeStat({ ino: 7n, ...written }))?.sha).toBe('sha-a');
    expect(cache.lookup('a.md', fakeStat({ ino: 7n, ...written }))?.sha).toBe('sha-a');
    expect(cache.lookup('a.md', fakeStat({ ino: 8n, ...written }))).toBeUndefined();
    expect(cache.lookup('a.md', fakeStat({ ino: 7n, ...written, ctimeNs: now - 1n }))).toBeUndefined();
    expect(cache.stats()).toEqual({ hits: 2, misses: 2 });
  });

  it('gives one chance: after a first stat that does not match, the file is read, even if it is changed back', () => {
    const cache = noted();
    expect(cache.lookup('a.md', fakeStat({ ino: 7n, ...written, size: 12n }))).toBeUndefined();
    expect(cache.lookup('a.md', fakeStat({ ino: 7n, ...written }))).toBeUndefined();
  });

  it('counts noted files in its size, and drops them with delete, retain, or a record of the path', () => {
    const cache = new StatCache({ nowNs: () => now, clockOffsetMs: () => 0 });
    for (const rel of ['a.md', 'b.md', 'c.md', 'd.md']) cache.expect(rel, 10, mtimeMs, `sha-${rel}`, true);
    cache.settleWritten(bound);
    expect(cache.size).toBe(4);
    cache.delete('a.md');
    cache.retain(new Set(['b.md', 'c.md']));
    expect(cache.size).toBe(2);
    cache.record('b.md', fakeStat({ ino: 9n, size: 3n, mtimeNs }), 'sha-new', true, now);
    expect(cache.size).toBe(2);
    expect(cache.lookup('a.md', fakeStat({ ino: 7n, ...written }))).toBeUndefined();
    expect(cache.lookup('d.md', fakeStat({ ino: 7n, ...written }))).toBeUndefined();
    expect(cache.lookup('b.md', fakeStat({ ino: 7n, ...written }))).toBeUndefined();
    expect(cache.lookup('b.md', fakeStat({ ino: 9n, size: 3n, mtimeNs }))?.sha).toBe('sha-new');
    expect(cache.lookup('c.md', fakeStat({ ino: 7n, ...written }))?.sha).toBe('sha-c.md');
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

  it("reads nothing on the first pass over files a fresh writer wrote (noted, not stat'ed), and reads each one changed since", async () => {
    const cache = new StatCache();
    const writer = dir.freshWriter();
    const mtimeMs = Date.now() - 10_000;
    for (let i = 0; i < 20; i++) {
      await writer.write(`n/${i}.md`, Buffer.from(`memory ${i}`), mtimeMs);
      cache.expect(`n/${i}.md`, Buffer.byteLength(`memory ${i}`), mtimeMs, `sha-${i}`, true);
    }
    const bound = writer.lastWrittenCtimeNs();
    expect(bound).toBe((await fsp.lstat(path.join(tmp, 'n/19.md'), { bigint: true })).ctimeNs);
    cache.settleWritten(bound);
    await writer.close();
    // Past the kernel's clock tick: a change now is stamped after every write's bound.
    await new Promise((resolve) => setTimeout(resolve, 30));
    // Same size, mtime restored to the ms (edited, then touched back).
    await fsp.writeFile(path.join(tmp, 'n/3.md'), 'MEMORY 3');
    await fsp.utimes(path.join(tmp, 'n/3.md'), mtimeMs / 1000, mtimeMs / 1000);
    // Only its mode changed.
    await fsp.chmod(path.join(tmp, 'n/4.md'), 0o600);
    // Replaced by a file of the same size and mtime, renamed over it.
    await fsp.writeFile(path.join(tmp, 'other.tmp'), 'memory 5');
    await fsp.utimes(path.join(tmp, 'other.tmp'), mtimeMs / 1000, mtimeMs / 1000);
    await fsp.rename(path.join(tmp, 'other.tmp'), path.join(tmp, 'n/5.md'));
    const first = await scanLocal(dir, cache);
    expect(first.filesRead).toBe(3);
    expect(first.entries.get('n/0.md')).toEqual({ kind: 'file', sha: 'sha-0', size: 8 });
    expect(first.entries.get('n/3.md')).not.toMatchObject({ sha: 'sha-3' });
    const second = await scanLocal(dir, cache);
    expect(second.filesRead).toBe(0);
    expect(second.entries.get('n/19.md')).toEqual({ kind: 'file', sha: 'sha-19', size: 9 });
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
