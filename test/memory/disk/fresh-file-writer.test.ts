/**
 * Pins the writer of a tree being materialised (the download at mount): each file lands whole under
 * its name with its backdated mtime and no temp file left, a file or symlink found at the name is
 * replaced without being followed, folders are created and pinned once and
 * closed past the descriptor budget, reserved names and unclean paths are refused, a folder swapped
 * for a symlink after it was pinned is never written through (in a batch of writes, it is found at
 * the batch's end), and a folder where the file goes is reported as such.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_OPEN_FOLDERS } from '../../../src/memory/disk/fresh-file-writer.js';
import { LocalDir, LocalDirError } from '../../../src/memory/disk/local-dir.js';
import { forceProcFd } from '../../../src/memory/disk/pinned-dir.js';
import { storeBesideOutside } from '../store-beside-outside.js';

let tmp: string;
let root: string;
let outside: string;
let dir: LocalDir;

beforeEach(async () => {
  ({ tmp, root, outside } = await storeBesideOutside('maw-fresh-'));
  dir = new LocalDir(root);
  await dir.createRoot();
});

afterEach(async () => {
  forceProcFd(undefined);
  await fsp.rm(tmp, { recursive: true, force: true });
});

async function failureOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof LocalDirError) return e.failure;
    throw e;
  }
  return 'no failure';
}

function allFiles(abs: string): string[] {
  return (fs.readdirSync(abs, { recursive: true, withFileTypes: true }) as fs.Dirent[])
    .filter((e) => e.isFile())
    .map((e) => path.relative(abs, path.join(e.parentPath, e.name)))
    .sort();
}

const openFds = (): number => fs.readdirSync('/proc/self/fd').length;

describe.each([
  { description: 'through /proc/self/fd', procFd: true },
  { description: 'with the portable re-check', procFd: false },
])('a fresh writer ($description)', ({ procFd }) => {
  beforeEach(() => forceProcFd(procFd));

  it('writes each file whole under its name, mtime backdated, with no temp file left', async () => {
    const writer = dir.freshWriter();
    const mtimeMs = Date.parse('2026-01-02T03:04:05Z');
    await writer.write('notes/deep/a.md', Buffer.from('alpha'), mtimeMs);
    await writer.write('notes/b.md', Buffer.from('beta'), mtimeMs);
    await writer.write('top.md', Buffer.from(''), mtimeMs);
    await writer.close();
    expect(allFiles(root)).toEqual(['notes/b.md', 'notes/deep/a.md', 'top.md']);
    expect(await fsp.readFile(path.join(root, 'notes/deep/a.md'), 'utf8')).toBe('alpha');
    const onDisk = await fsp.lstat(path.join(root, 'notes/deep/a.md'), { bigint: true });
    expect(onDisk.mtimeMs).toBe(BigInt(mtimeMs));
    expect(onDisk.size).toBe(5n);
  });

  it('reads back the ctime of the last file written, and nothing before a write, once that file changed, or after close', async () => {
    const writer = dir.freshWriter();
    expect(writer.lastWrittenCtimeNs()).toBeUndefined();
    const mtimeMs = Date.parse('2026-01-02T03:04:05Z');
    await writer.write('sub/a.md', Buffer.from('alpha'), mtimeMs);
    await writer.write('sub/b.md', Buffer.from('beta'), mtimeMs);
    expect(writer.lastWrittenCtimeNs()).toBe((await fsp.lstat(path.join(root, 'sub/b.md'), { bigint: true })).ctimeNs);
    await fsp.appendFile(path.join(root, 'sub/b.md'), '!');
    expect(writer.lastWrittenCtimeNs()).toBeUndefined();
    await writer.write('sub/c.md', Buffer.from('gamma'), mtimeMs);
    expect(writer.lastWrittenCtimeNs()).toBeDefined();
    // A refused write wrote nothing: the last file written is still the one before it.
    expect(await failureOf(writer.write('sub/../d.md', Buffer.from('x'), mtimeMs))).toBe('bad-path');
    expect(writer.lastWrittenCtimeNs()).toBe((await fsp.lstat(path.join(root, 'sub/c.md'), { bigint: true })).ctimeNs);
    await writer.write('sub/e.md', Buffer.from('epsilon'), mtimeMs);
    await writer.close();
    expect(writer.lastWrittenCtimeNs()).toBeUndefined();
  });

  it.each([
    { description: 'a parent segment', rel: 'a/../b.md', failure: 'bad-path' },
    { description: 'an empty segment', rel: 'a//b.md', failure: 'bad-path' },
    { description: 'our temp-file prefix', rel: 'sub/.maw-tmp-x', failure: 'bad-path' },
    { description: 'the marker name at the root', rel: '.anthropic-memory-store', failure: 'bad-path' },
  ])('refuses $description', async ({ rel, failure }) => {
    const writer = dir.freshWriter();
    expect(await failureOf(writer.write(rel, Buffer.from('x'), Date.now()))).toBe(failure);
    await writer.close();
    expect(allFiles(root)).toEqual([]);
  });

  it('links a file to a source, and makes no link where a file is, where the source is gone, or through a swapped folder', async () => {
    const source = path.join(tmp, 'blob');
    fs.writeFileSync(source, 'cached');
    const writer = dir.freshWriter();
    const st = writer.linkNow('sub/linked.md', source);
    expect(st?.ino).toBe(fs.statSync(source, { bigint: true }).ino);
    expect(fs.readFileSync(path.join(root, 'sub/linked.md'), 'utf8')).toBe('cached');
    // Something at the name already, or no source: no link, the caller writes the bytes.
    expect(writer.linkNow('sub/linked.md', source)).toBeUndefined();
    expect(writer.linkNow('sub/other.md', path.join(tmp, 'gone'))).toBeUndefined();
    expect(fs.existsSync(path.join(root, 'sub/other.md'))).toBe(false);
    // A folder swapped for a symlink is never linked into.
    await fsp.rename(path.join(root, 'sub'), path.join(tmp, 'moved'));
    await fsp.symlink(outside, path.join(root, 'sub'));
    expect(() => writer.linkNow('sub/third.md', source)).toThrow(LocalDirError);
    await writer.close();
    expect(fs.readdirSync(outside)).toEqual([]);
  });

  it('stops linking once the filesystem refuses links from the source (another filesystem)', async () => {
    // /dev/shm is a tmpfs of its own where the temp folder is not on it.
    const other = fs.mkdtempSync(path.join('/dev/shm', 'maw-link-'));
    try {
      const source = path.join(other, 'blob');
      fs.writeFileSync(source, 'cached');
      expect(fs.statSync(other).dev, 'the source on another filesystem than the store').not.toBe(fs.statSync(root).dev);
      const writer = dir.freshWriter();
      expect(writer.linkNow('a.md', source)).toBeUndefined();
      // A file of the same filesystem is not tried either: the writer gave up on links.
      const near = path.join(tmp, 'near');
      fs.writeFileSync(near, 'near');
      expect(writer.linkNow('b.md', near)).toBeUndefined();
      await writer.close();
      expect(allFiles(root).filter((f) => f.endsWith('.md'))).toEqual([]);
    } finally {
      fs.rmSync(other, { recursive: true, force: true });
    }
  });

  it('never writes through a folder swapped for a symlink after it was pinned', async () => {
    const writer = dir.freshWriter();
    await writer.write('sub/first.md', Buffer.from('1'), Date.now());
    await fsp.rename(path.join(root, 'sub'), path.join(tmp, 'moved'));
    await fsp.symlink(outside, path.join(root, 'sub'));
    expect(await failureOf(writer.write('sub/second.md', Buffer.from('2'), Date.now()))).toMatch(/replaced|symlink/);
    // Pinned again on the next write, and refused again.
    expect(await failureOf(writer.write('sub/third.md', Buffer.from('3'), Date.now()))).toBe('symlink');
    await writer.close();
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(fs.readdirSync(path.join(tmp, 'moved'))).toEqual(['first.md']);
  });

  it('in a batch, finds a folder swapped during the batch at its end, never writes through the symlink, and pins the folder again after it', async () => {
    const writer = dir.freshWriter();
    writer.beginBatch();
    await writer.write('sub/first.md', Buffer.from('1'), Date.now());
    await fsp.rename(path.join(root, 'sub'), path.join(tmp, 'moved'));
    await fsp.symlink(outside, path.join(root, 'sub'));
    if (procFd) {
      // Checked once per batch: the second write goes through the pinned folder (now moved away) …
      await writer.write('sub/second.md', Buffer.from('2'), Date.now());
      // … and the batch's end finds the swap.
      expect(await failureOf(writer.endBatch())).toBe('replaced');
    } else {
      // Reached by path, every write is checked first, in a batch too.
      expect(await failureOf(writer.write('sub/second.md', Buffer.from('2'), Date.now()))).toMatch(/replaced|symlink/);
      await writer.endBatch();
    }
    // The next write (outside a batch) pins the folder again and is refused.
    expect(await failureOf(writer.write('sub/third.md', Buffer.from('3'), Date.now()))).toBe('symlink');
    await writer.close();
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(fs.readdirSync(path.join(tmp, 'moved')).sort()).toEqual(procFd ? ['first.md', 'second.md'] : ['first.md']);
  });

  it('in a batch over several folders, finds the store root swapped during the batch at its end', async () => {
    const writer = dir.freshWriter();
    writer.beginBatch();
    await writer.write('a/1.md', Buffer.from('1'), Date.now());
    await writer.write('b/1.md', Buffer.from('1'), Date.now());
    await fsp.rename(root, path.join(tmp, 'moved-root'));
    await fsp.symlink(outside, root);
    if (procFd) {
      await writer.write('b/2.md', Buffer.from('2'), Date.now());
      expect(await failureOf(writer.endBatch())).toBe('replaced');
    } else {
      expect(await failureOf(writer.write('b/2.md', Buffer.from('2'), Date.now()))).toMatch(/replaced|symlink/);
      await writer.endBatch({ check: false });
    }
    await writer.close();
    expect(fs.readdirSync(outside)).toEqual([]);
  });

  it('checks the store root again at the first write of the next batch', async () => {
    const writer = dir.freshWriter();
    writer.beginBatch();
    await writer.write('a/1.md', Buffer.from('1'), Date.now());
    await writer.write('b/1.md', Buffer.from('1'), Date.now());
    await writer.endBatch();
    await fsp.rename(root, path.join(tmp, 'moved-root'));
    await fsp.mkdir(root);
    writer.beginBatch();
    // The root is another folder now: the batch's first check finds it, before anything is written.
    expect(await failureOf(writer.write('b/2.md', Buffer.from('2'), Date.now()))).toBe('replaced');
    await writer.endBatch({ check: false });
    await writer.close();
    expect(allFiles(path.join(tmp, 'moved-root'))).toEqual(['a/1.md', 'b/1.md']);
    expect(allFiles(root)).toEqual([]);
  });

  it('checks every write again once its batch ended, and ends a failed batch without checking', async () => {
    const writer = dir.freshWriter();
    writer.beginBatch();
    await writer.write('sub/first.md', Buffer.from('1'), Date.now());
    await writer.endBatch();
    await fsp.rename(path.join(root, 'sub'), path.join(tmp, 'moved'));
    await fsp.symlink(outside, path.join(root, 'sub'));
    expect(await failureOf(writer.write('sub/second.md', Buffer.from('2'), Date.now()))).toMatch(/replaced|symlink/);
    writer.beginBatch();
    await writer.endBatch({ check: false });
    await writer.close();
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(fs.readdirSync(path.join(tmp, 'moved'))).toEqual(['first.md']);
  });

  it('replaces a file or a symlink found at the name (placed while downloading) without following it, and leaves no temp file', async () => {
    await fsp.mkdir(path.join(root, 'sub'));
    await fsp.writeFile(path.join(root, 'sub/placed.md'), 'placed by someone else');
    await fsp.writeFile(path.join(outside, 'target.md'), 'outside');
    await fsp.symlink(path.join(outside, 'target.md'), path.join(root, 'sub/link.md'));
    await fsp.symlink(path.join(outside, 'nothing-yet.md'), path.join(root, 'sub/dangling.md'));
    const writer = dir.freshWriter();
    const mtimeMs = Date.parse('2026-01-02T03:04:05Z');
    for (const name of ['placed.md', 'link.md', 'dangling.md']) {
      await writer.write(`sub/${name}`, Buffer.from(`ours ${name}`), mtimeMs);
      const onDisk = await fsp.lstat(path.join(root, 'sub', name), { bigint: true });
      expect(onDisk.isFile()).toBe(true);
      expect(onDisk.mtimeMs).toBe(BigInt(mtimeMs));
      expect(await fsp.readFile(path.join(root, 'sub', name), 'utf8')).toBe(`ours ${name}`);
    }
    await writer.close();
    expect(fs.readdirSync(path.join(root, 'sub')).sort()).toEqual(['dangling.md', 'link.md', 'placed.md']);
    expect(fs.readdirSync(outside)).toEqual(['target.md']);
    expect(await fsp.readFile(path.join(outside, 'target.md'), 'utf8')).toBe('outside');
  });

  it('reports a folder where the file goes, and leaves no temp file', async () => {
    await fsp.mkdir(path.join(root, 'taken.md'));
    const writer = dir.freshWriter();
    expect(await failureOf(writer.write('taken.md', Buffer.from('x'), Date.now()))).toBe('not-regular');
    await writer.close();
    expect(fs.readdirSync(root)).toEqual(['taken.md']);
  });
});

describe('a fresh writer over many folders', () => {
  it(`keeps at most ${MAX_OPEN_FOLDERS} folders open and writes every file`, async () => {
    const before = openFds();
    const writer = dir.freshWriter();
    let most = 0;
    for (let i = 0; i < 3 * MAX_OPEN_FOLDERS; i++) {
      await writer.write(`f${i}/g/x.md`, Buffer.from(String(i)), Date.now());
      most = Math.max(most, openFds() - before);
    }
    // Written again into the first folder, evicted long ago: pinned again.
    await writer.write('f0/g/y.md', Buffer.from('again'), Date.now());
    await writer.close();
    expect(most).toBeLessThanOrEqual(MAX_OPEN_FOLDERS);
    expect(openFds()).toBe(before);
    expect(allFiles(root)).toHaveLength(3 * MAX_OPEN_FOLDERS + 1);
    expect(await fsp.readFile(path.join(root, 'f0/g/y.md'), 'utf8')).toBe('again');
  });

  it('in a batch over more folders than it keeps open, finds a folder swapped before it was closed, at the batch end', async () => {
    const writer = dir.freshWriter();
    writer.beginBatch();
    await writer.write('f0/x.md', Buffer.from('0'), Date.now());
    await fsp.rename(path.join(root, 'f0'), path.join(tmp, 'moved'));
    await fsp.symlink(outside, path.join(root, 'f0'));
    // Enough other folders for f0 to be closed (least recently used) during the batch.
    for (let i = 1; i <= MAX_OPEN_FOLDERS; i++) await writer.write(`f${i}/x.md`, Buffer.from(String(i)), Date.now());
    expect(await failureOf(writer.endBatch())).toBe('replaced');
    await writer.close();
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(fs.readdirSync(path.join(tmp, 'moved'))).toEqual(['x.md']);
  });

  it('ends a batch over more folders than it keeps open, the ones closed during it included', async () => {
    const writer = dir.freshWriter();
    writer.beginBatch();
    for (let i = 0; i < 2 * MAX_OPEN_FOLDERS; i++) await writer.write(`f${i}/x.md`, Buffer.from(String(i)), Date.now());
    await writer.endBatch();
    // The next batch checks what it writes through as usual: a folder swapped since is found.
    await fsp.rename(path.join(root, `f${2 * MAX_OPEN_FOLDERS - 1}`), path.join(tmp, 'moved'));
    await fsp.symlink(outside, path.join(root, `f${2 * MAX_OPEN_FOLDERS - 1}`));
    writer.beginBatch();
    expect(await failureOf(writer.write(`f${2 * MAX_OPEN_FOLDERS - 1}/y.md`, Buffer.from('y'), Date.now()))).toMatch(/replaced|symlink/);
    await writer.endBatch({ check: false });
    await writer.close();
    expect(allFiles(root)).toHaveLength(2 * MAX_OPEN_FOLDERS - 1);
    expect(fs.readdirSync(outside)).toEqual([]);
  });
});
