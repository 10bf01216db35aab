/**
 * Pins the reads the scan makes in the folders it has pinned: whatever an agent swaps in between
 * the walk's lstat and the read (a folder moved out of the mount and replaced by a symlink, a
 * symlink or a FIFO in place of the file, a file grown past the limit) is refused and reported as
 * skipped, never read; an ordinary tree is read whole with the bytes that were hashed.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalDir, LocalDirError } from '../../../src/memory/disk/local-dir.js';
import { scanLocal, sha256Hex } from '../../../src/memory/disk/local-scan.js';
import { forceProcFd } from '../../../src/memory/disk/pinned-dir.js';
import { StatCache } from '../../../src/memory/disk/stat-cache.js';
import { storeBesideOutside } from '../store-beside-outside.js';

let tmp: string;
let root: string;
let outside: string;
let dir: LocalDir;

beforeEach(async () => {
  ({ tmp, root, outside } = await storeBesideOutside('maw-scan-reads-', ['notes']));
  await fsp.writeFile(path.join(outside, 'b.md'), 'outside bytes');
  await fsp.writeFile(path.join(root, 'notes', 'b.md'), 'inside bytes');
  dir = new LocalDir(root);
});

afterEach(async () => {
  forceProcFd(undefined);
  await fsp.rm(tmp, { recursive: true, force: true });
});

/** Scan with `swap` run right before the read of `target`; returns what each read gave or threw. */
async function scanSwapping(target: string, swap: () => void, maxBytes = 1000): Promise<Map<string, string>> {
  const got = new Map<string, string>();
  await dir.scan((rel, _st, read) => {
    if (rel === target) swap();
    try {
      got.set(rel, read(maxBytes).bytes.toString('utf8'));
    } catch (e) {
      got.set(rel, e instanceof LocalDirError ? `refused: ${e.failure}` : `error: ${String(e)}`);
    }
  });
  return got;
}

function moveFolderOutForSymlink(): void {
  fs.renameSync(path.join(root, 'notes'), path.join(tmp, 'moved'));
  fs.writeFileSync(path.join(tmp, 'moved', 'b.md'), 'moved bytes');
  fs.symlinkSync(outside, path.join(root, 'notes'));
}

describe.each([
  { description: 'through /proc/self/fd', procFd: undefined },
  { description: 'with absolute paths and lstat re-checks', procFd: false },
])('scan reads $description', ({ procFd }) => {
  beforeEach(() => forceProcFd(procFd));

  it('refuses a file whose folder was moved out of the mount after the walk pinned it', async () => {
    const got = await scanSwapping('notes/b.md', moveFolderOutForSymlink);
    expect(got.get('notes/b.md')).toBe('refused: replaced');
  });

  it('refuses a file swapped for a symlink after its lstat', async () => {
    const got = await scanSwapping('notes/b.md', () => {
      fs.rmSync(path.join(root, 'notes', 'b.md'));
      fs.symlinkSync(path.join(outside, 'b.md'), path.join(root, 'notes', 'b.md'));
    });
    expect(got.get('notes/b.md')).toBe('refused: symlink');
  });

  it('refuses a file swapped for a FIFO after its lstat, without blocking on it', async () => {
    const got = await scanSwapping('notes/b.md', () => {
      fs.rmSync(path.join(root, 'notes', 'b.md'));
      execFileSync('mkfifo', [path.join(root, 'notes', 'b.md')]);
    });
    expect(got.get('notes/b.md')).toBe('refused: not-regular');
  });

  it('refuses a file grown past the limit after its lstat', async () => {
    const got = await scanSwapping('notes/b.md', () => fs.writeFileSync(path.join(root, 'notes', 'b.md'), 'x'.repeat(1001)));
    expect(got.get('notes/b.md')).toBe('refused: too-large');
  });

  it('reads a file of exactly the limit, and files of every size below it whole', async () => {
    const sizes = [0, 1, 999, 1000];
    for (const n of sizes) await fsp.writeFile(path.join(root, `f${n}.md`), 'y'.repeat(n));
    const got = await scanSwapping('', () => {});
    for (const n of sizes) expect(got.get(`f${n}.md`)).toBe('y'.repeat(n));
  });
});

describe('scanLocal over swapped entries', () => {
  it('reports a file whose folder left the mount as skipped, never reads it and never takes it for a deletion', async () => {
    await fsp.writeFile(path.join(root, 'top.md'), 'top');
    const cache = new StatCache();
    let swapped = false;
    // The swap happens between the walk's lstat of notes/b.md and its read: the read is refused.
    const original = dir.scan.bind(dir);
    dir.scan = (onFile) =>
      original((rel, st, read) => {
        if (rel === 'notes/b.md' && !swapped) {
          swapped = true;
          moveFolderOutForSymlink();
        }
        onFile?.(rel, st, read);
      });

    const scan = await scanLocal(dir, cache);

    expect(swapped).toBe(true);
    expect(scan.entries.get('top.md')).toMatchObject({ kind: 'file', sha: sha256Hex(Buffer.from('top')) });
    expect(scan.entries.has('notes/b.md')).toBe(false);
    expect(scan.stats.has('notes/b.md')).toBe(false);
    expect(scan.skipped).toContainEqual(expect.objectContaining({ rel: 'notes/b.md', kind: 'vanished', code: 'replaced' }));
    expect([...scan.contents.values()].map((b) => b.toString('utf8'))).not.toContain('moved bytes');
    expect([...scan.contents.values()].map((b) => b.toString('utf8'))).not.toContain('outside bytes');
  });
});
