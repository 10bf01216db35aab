/**
 * Pins the hardened filesystem layer: no read or write passes through a symlink in any path
 * component, a FIFO is never opened for reading (and never blocks), writes are atomic and leave no
 * temp file behind, paths that could leave the root are refused, and the scan skips special files
 * and our reserved names without opening them.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalDir, LocalDirError } from '../../../src/memory/disk/local-dir.js';
import { storeBesideOutside } from '../store-beside-outside.js';

let tmp: string;
let root: string;
let outside: string;
let dir: LocalDir;

beforeEach(async () => {
  ({ tmp, root, outside } = await storeBesideOutside('maw-localdir-'));
  await fsp.writeFile(path.join(outside, 'secret.md'), 'outside bytes');
  dir = new LocalDir(root);
});

afterEach(async () => {
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

describe('reading', () => {
  it('reads a regular file in a nested folder', async () => {
    await fsp.mkdir(path.join(root, 'a/b'), { recursive: true });
    await fsp.writeFile(path.join(root, 'a/b/c.md'), 'hello');
    const { bytes } = await dir.readFile('a/b/c.md');
    expect(bytes.toString()).toBe('hello');
  });

  it('refuses a symlink as the final component', async () => {
    await fsp.symlink(path.join(outside, 'secret.md'), path.join(root, 'link.md'));
    expect(await failureOf(dir.readFile('link.md'))).toBe('symlink');
  });

  it('refuses a symlink as an intermediate component', async () => {
    await fsp.symlink(outside, path.join(root, 'sub'));
    expect(await failureOf(dir.readFile('sub/secret.md'))).toBe('symlink');
  });

  it('refuses to read when the root itself is a symlink', async () => {
    const linkedRoot = path.join(tmp, 'linked-root');
    await fsp.symlink(outside, linkedRoot);
    expect(await failureOf(new LocalDir(linkedRoot).readFile('secret.md'))).toBe('symlink');
  });

  it('never blocks on or reads from a FIFO', async () => {
    execFileSync('mkfifo', [path.join(root, 'pipe.md')]);
    const started = Date.now();
    expect(await failureOf(dir.readFile('pipe.md'))).toBe('not-regular');
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('refuses a file over the limit from its size, without reading it', async () => {
    await fsp.writeFile(path.join(root, 'big.md'), Buffer.alloc(200_000, 0x61));
    expect(await failureOf(dir.readFile('big.md', 102_400))).toBe('too-large');
  });

  it.each([
    { description: 'a parent reference', rel: '../outside/secret.md' },
    { description: 'a parent reference in the middle', rel: 'a/../../outside/secret.md' },
    { description: 'an empty segment', rel: 'a//b.md' },
    { description: 'a dot segment', rel: './b.md' },
    { description: 'a NUL byte', rel: 'a\0b.md' },
    { description: 'an absolute path', rel: '/etc/passwd' },
  ])('refuses a path with $description', async ({ rel }) => {
    expect(await failureOf(dir.readFile(rel))).toBe('bad-path');
  });
});

describe('writing', () => {
  it('writes atomically and leaves no temp file behind', async () => {
    await dir.writeFileAtomic('notes/deep/todo.md', Buffer.from('v1'));
    await dir.writeFileAtomic('notes/deep/todo.md', Buffer.from('v2'));
    expect(await fsp.readFile(path.join(root, 'notes/deep/todo.md'), 'utf8')).toBe('v2');
    expect(await fsp.readdir(path.join(root, 'notes/deep'))).toEqual(['todo.md']);
  });

  it('backdates the mtime when asked and returns the stat of the written inode', async () => {
    const mtimeMs = Date.now() - 60_000;
    const st = await dir.writeFileAtomic('x.md', Buffer.from('abc'), { mtimeMs });
    const onDisk = await fsp.lstat(path.join(root, 'x.md'), { bigint: true });
    expect(st.ino).toBe(onDisk.ino);
    expect(st.size).toBe(3n);
    expect(Math.abs(Number(onDisk.mtimeMs) - mtimeMs)).toBeLessThan(1_000);
  });

  it('refuses to write through a symlinked intermediate folder', async () => {
    await fsp.symlink(outside, path.join(root, 'sub'));
    expect(await failureOf(dir.writeFileAtomic('sub/new.md', Buffer.from('x')))).toBe('symlink');
    expect(await fsp.readdir(outside)).toEqual(['secret.md']);
  });

  it('replaces a planted symlink at the final component without touching its target', async () => {
    await fsp.symlink(path.join(outside, 'secret.md'), path.join(root, 'm.md'));
    await dir.writeFileAtomic('m.md', Buffer.from('memory'));
    expect((await fsp.lstat(path.join(root, 'm.md'))).isFile()).toBe(true);
    expect(await fsp.readFile(path.join(outside, 'secret.md'), 'utf8')).toBe('outside bytes');
  });

  it('refuses to create a folder where a file of that name exists', async () => {
    await fsp.writeFile(path.join(root, 'notes'), 'a file');
    expect(await failureOf(dir.writeFileAtomic('notes/todo.md', Buffer.from('x')))).toBe('not-directory');
  });

  it('refuses to write a file where a folder of that name exists', async () => {
    await fsp.mkdir(path.join(root, 'notes'));
    expect(await failureOf(dir.writeFileAtomic('notes', Buffer.from('x')))).toBe('not-regular');
  });

  it('refuses reserved names: the marker and the temp prefix', async () => {
    expect(await failureOf(dir.writeFileAtomic('.anthropic-memory-store', Buffer.from('x')))).toBe('bad-path');
    expect(await failureOf(dir.writeFileAtomic('a/.maw-tmp-123', Buffer.from('x')))).toBe('bad-path');
  });

  it('refuses a path that escapes the root', async () => {
    expect(await failureOf(dir.writeFileAtomic('../outside/evil.md', Buffer.from('x')))).toBe('bad-path');
    expect(fs.existsSync(path.join(outside, 'evil.md'))).toBe(false);
  });
});

describe('removing', () => {
  it('removes a file and the folders it leaves empty, never the root', async () => {
    await dir.writeFileAtomic('a/b/c.md', Buffer.from('x'));
    expect(await dir.removeFile('a/b/c.md')).toBe(true);
    expect(await fsp.readdir(root)).toEqual([]);
    expect(fs.existsSync(root)).toBe(true);
  });

  it('refuses to remove through a symlinked folder', async () => {
    await fsp.symlink(outside, path.join(root, 'sub'));
    expect(await failureOf(dir.removeFile('sub/secret.md'))).toBe('symlink');
    expect(fs.existsSync(path.join(outside, 'secret.md'))).toBe(true);
  });
});

describe('scanning', () => {
  it('lists regular files and skips symlinks, FIFOs, the marker and temp files without opening them', async () => {
    await dir.writeFileAtomic('a/one.md', Buffer.from('1'));
    await dir.writeFileAtomic('two.md', Buffer.from('2'));
    await dir.writeMarker('version 1\nmemstore_x');
    await fsp.writeFile(path.join(root, '.maw-tmp-abc'), 'half');
    await fsp.symlink(path.join(outside, 'secret.md'), path.join(root, 'link.md'));
    await fsp.symlink(outside, path.join(root, 'linkdir'));
    execFileSync('mkfifo', [path.join(root, 'a/pipe')]);
    const scan = await dir.scan();
    expect([...scan.files.keys()].sort()).toEqual(['a/one.md', 'two.md']);
    expect(scan.markerPresent).toBe(true);
    expect(scan.skipped.map((s) => `${s.kind}:${s.rel}`).sort()).toEqual(['fifo:a/pipe', 'symlink:link.md', 'symlink:linkdir']);
  });

  it('refuses to scan a root that was swapped for a symlink', async () => {
    const linkedRoot = path.join(tmp, 'linked-root');
    await fsp.symlink(outside, linkedRoot);
    expect(await failureOf(new LocalDir(linkedRoot).scan())).toBe('symlink');
  });
});

describe('copying out', () => {
  it('streams a file of any size to a destination outside the mount', async () => {
    await fsp.writeFile(path.join(root, 'big.bin'), Buffer.alloc(300_000, 7));
    const dest = path.join(tmp, 'copy.bin');
    await dir.copyOut('big.bin', dest);
    expect((await fsp.readFile(dest)).equals(Buffer.alloc(300_000, 7))).toBe(true);
  });
});

describe('after dispose (the unmount)', () => {
  const writes: Array<[string, (d: LocalDir) => Promise<unknown>]> = [
    ['writeFileAtomic of a new file in a new folder', (d) => d.writeFileAtomic('new/deep.md', Buffer.from('late'))],
    ['writeFileAtomic over an existing file', (d) => d.writeFileAtomic('kept.md', Buffer.from('late'))],
    ['removeFile', (d) => d.removeFile('sub/inner.md')],
    ['writeMarker', (d) => d.writeMarker('version 1\nmemstore_late')],
    ['createRoot', (d) => d.createRoot()],
  ];
  for (const [name, op] of writes) {
    it(`refuses ${name} and leaves the disk as it was`, async () => {
      await fsp.writeFile(path.join(root, 'kept.md'), 'kept');
      await fsp.mkdir(path.join(root, 'sub'));
      await fsp.writeFile(path.join(root, 'sub', 'inner.md'), 'inner');
      dir.dispose();
      expect(await failureOf(op(dir))).toBe('disposed');
      expect((await fsp.readdir(root)).sort()).toEqual(['kept.md', 'sub']);
      expect(await fsp.readFile(path.join(root, 'kept.md'), 'utf8')).toBe('kept');
      expect(await fsp.readdir(path.join(root, 'sub'))).toEqual(['inner.md']);
    });
  }

  it('does not re-create a removed root', async () => {
    await fsp.rm(root, { recursive: true });
    dir.dispose();
    expect(await failureOf(dir.createRoot())).toBe('disposed');
    expect(fs.existsSync(root)).toBe(false);
  });

  it('still lets the unmount remove the root and read what it needs', async () => {
    await fsp.writeFile(path.join(root, 'kept.md'), 'kept');
    dir.dispose();
    expect((await dir.readFile('kept.md')).bytes.toString()).toBe('kept');
    await dir.removeRoot();
    expect(fs.existsSync(root)).toBe(false);
  });
});

/** Make a folder chain `depth` levels deep below `base` whatever its total length (fd-relative). */
async function deepTree(base: string, depth: number, seg: string): Promise<void> {
  let fh = await fsp.open(base, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  for (let i = 0; i < depth; i++) {
    const next = `/proc/self/fd/${fh.fd}/${seg}`;
    await fsp.mkdir(next);
    if (i === depth - 1) await fsp.writeFile(`/proc/self/fd/${fh.fd}/${seg}/leaf.md`, 'deep');
    const child = await fsp.open(next, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
    await fh.close();
    fh = child;
  }
  await fh.close();
}

describe('scan tolerance', () => {
  it('returns sockets, devices, FIFOs and symlinks in skipped with a reason, and never throws for them', async () => {
    await dir.writeFileAtomic('keep.md', Buffer.from('k'));
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(path.join(root, 'agent.sock'), resolve));
    try {
      execFileSync('mkfifo', [path.join(root, 'pipe.md')]);
      execFileSync('mknod', [path.join(root, 'null.md'), 'c', '1', '3']);
      await fsp.symlink('/etc/passwd', path.join(root, 'passwd.md'));
      const scan = await dir.scan();
      expect([...scan.files.keys()]).toEqual(['keep.md']);
      const byRel = Object.fromEntries(scan.skipped.map((s) => [s.rel, s]));
      expect(byRel['agent.sock']?.kind).toBe('socket');
      expect(byRel['pipe.md']?.kind).toBe('fifo');
      expect(byRel['null.md']?.kind).toBe('device');
      expect(byRel['passwd.md']?.kind).toBe('symlink');
      for (const s of scan.skipped) expect(s.reason).toMatch(/never (opened|followed)/);
    } finally {
      server.close();
    }
  });

  it('reports a folder deeper than a memory path can reach instead of walking it, and keeps the rest', async () => {
    await dir.writeFileAtomic('keep.md', Buffer.from('k'));
    await deepTree(root, 30, 'd');
    const scan = await dir.scan();
    expect([...scan.files.keys()]).toEqual(['keep.md']);
    expect(scan.skipped).toHaveLength(1);
    expect(scan.skipped[0]!.kind).toBe('too-deep');
    expect(scan.skipped[0]!.rel.split('/')).toHaveLength(20);
    expect(scan.skipped[0]!.reason).toContain('at most 20 segments');
  });

  it('scans a tree deeper than PATH_MAX without ENAMETOOLONG', async () => {
    await deepTree(root, 350, 'x'.repeat(12));
    await dir.writeFileAtomic('keep.md', Buffer.from('k'));
    const scan = await dir.scan();
    expect([...scan.files.keys()]).toEqual(['keep.md']);
    expect(scan.skipped.map((s) => s.kind)).toEqual(['too-deep']);
    await dir.removeRoot();
  });

  it('returns a folder it may not list as unreadable, and the other files (as an unprivileged user)', async () => {
    await fsp.chmod(tmp, 0o755);
    await dir.writeFileAtomic('keep.md', Buffer.from('k'));
    await dir.writeFileAtomic('locked/inner.md', Buffer.from('i'));
    await fsp.chmod(path.join(root, 'locked'), 0o000);
    // The unprivileged child may not be able to reach this checkout (a 0700 parent folder), so it
    // runs a self-contained bundle written beside the test folder.
    const entry = path.join(tmp, 'scan.ts');
    const localDir = path.resolve('src/memory/disk/local-dir.ts');
    await fsp.writeFile(
      entry,
      `import { LocalDir } from ${JSON.stringify(localDir)};\n` +
        `const scan = await new LocalDir(${JSON.stringify(root)}).scan();\n` +
        'console.log(JSON.stringify({ files: [...scan.files.keys()], skipped: scan.skipped }));\n',
    );
    const { build } = await import('tsup');
    await build({
      entry: { scan: entry },
      outDir: path.join(tmp, 'bundle'),
      format: ['esm'],
      platform: 'node',
      target: 'node20',
      bundle: true,
      silent: true,
      config: false,
      dts: false,
      sourcemap: false,
      clean: false,
      outExtension: () => ({ js: '.mjs' }),
    });
    const script = path.join(tmp, 'bundle', 'scan.mjs');
    await fsp.chmod(path.join(tmp, 'bundle'), 0o755);
    await fsp.chmod(script, 0o644);
    const out = execFileSync(process.execPath, [script], { uid: 65534, gid: 65534, encoding: 'utf8' });
    const result = JSON.parse(out) as { files: string[]; skipped: Array<{ rel: string; kind: string; reason: string }> };
    expect(result.files).toEqual(['keep.md']);
    expect(result.skipped).toEqual([{ rel: 'locked', kind: 'unreadable', code: 'EACCES', reason: expect.stringContaining('EACCES') }]);
  }, 30_000);
});

describe('removing the root (the unmount)', () => {
  it('removes a tree deeper than PATH_MAX', async () => {
    await deepTree(root, 350, 'y'.repeat(12));
    await dir.removeRoot();
    expect(fs.existsSync(root)).toBe(false);
  });

  it('unlinks planted symlinks without following them and leaves their targets alone', async () => {
    await fsp.symlink(outside, path.join(root, 'sub'));
    await fsp.symlink(path.join(outside, 'secret.md'), path.join(root, 'secret.md'));
    await dir.writeFileAtomic('real/inner.md', Buffer.from('x'));
    await fsp.symlink(outside, path.join(root, 'real', 'nested-link'));
    await dir.removeRoot();
    expect(fs.existsSync(root)).toBe(false);
    expect(await fsp.readFile(path.join(outside, 'secret.md'), 'utf8')).toBe('outside bytes');
  });

  it('refuses to remove a root that was replaced by another folder since it was first opened', async () => {
    await dir.writeFileAtomic('a.md', Buffer.from('a'));
    await fsp.rename(root, path.join(tmp, 'moved'));
    await fsp.mkdir(root);
    await fsp.writeFile(path.join(root, 'foreign.md'), 'foreign');
    expect(await failureOf(dir.removeRoot())).toBe('replaced');
    expect(await fsp.readFile(path.join(root, 'foreign.md'), 'utf8')).toBe('foreign');
  });
});

describe('pinned folders', () => {
  it('refuses to write into a folder moved out of the mount after it was opened', async () => {
    await dir.writeFileAtomic('sub/a.md', Buffer.from('a'));
    await fsp.rename(path.join(root, 'sub'), path.join(outside, 'sub'));
    await fsp.symlink(path.join(outside, 'sub'), path.join(root, 'sub'));
    expect(await failureOf(dir.writeFileAtomic('sub/b.md', Buffer.from('b')))).toBe('symlink');
    expect(await fsp.readdir(path.join(outside, 'sub'))).toEqual(['a.md']);
  });
});

describe('copying out a planted giant', () => {
  it('refuses a file over the copy limit from its size, without copying a byte', async () => {
    const fh = await fsp.open(path.join(root, 'sparse.md'), 'w');
    await fh.truncate(1024 ** 3);
    await fh.close();
    const dest = path.join(tmp, 'copy.md');
    expect(await failureOf(dir.copyOut('sparse.md', dest))).toBe('too-large');
    expect(fs.existsSync(dest)).toBe(false);
  });
});
