import { randomBytes } from 'node:crypto';
import { constants as fsc, type BigIntStats } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { MARKER_FILE_NAME } from './marker.js';
import { TEMP_FILE_PREFIX } from './paths.js';

/**
 * Hardened access to one mounted store folder (requirement X6).
 *
 * Rules every method follows:
 * - paths are store-relative POSIX paths (`notes/todo.md`); `..`, `.`, empty segments and NUL are
 *   refused before anything touches the disk, so nothing is ever read or written outside the root;
 * - before a file is opened, the root and every folder between it and the file are `lstat`ed and
 *   must be real directories (a symlink anywhere in the chain is refused);
 * - every open carries `O_NOFOLLOW` (a symlink as the last component fails with ELOOP) and reads
 *   also carry `O_NONBLOCK` followed by an `fstat` check, so a FIFO or device is never read from;
 * - writes are atomic: a temp file `.maw-tmp-<random>` created with `O_CREAT|O_EXCL|O_NOFOLLOW` in
 *   the target's own folder, written, then renamed over the target; the agent never sees half a file;
 * - missing folders are created one component at a time, each checked after creation;
 * - once {@link LocalDir.dispose} ran (the unmount), every mkdir, create, rename and unlink is
 *   refused, checked right before the call: a sync that outlives the unmount touches nothing.
 *
 * Node has no `openat`, so a check-then-open window remains between the parent-chain check and the
 * open; `O_NOFOLLOW` still guarantees the final component is never followed.
 */

/** File name of the marker that binds a folder to its store (api-contract §8). */
const MARKER_FILE = MARKER_FILE_NAME;
/** Prefix of our own temp files; reserved, never synced in either direction. */
const TEMP_PREFIX = TEMP_FILE_PREFIX;
/** The server refuses content larger than this many bytes (api-contract §7.4). */
export const MAX_MEMORY_BYTES = 102_400;

export type LocalDirFailure =
  /** a path component (or the file itself) is a symlink */
  | 'symlink'
  /** a path component exists but is not a directory */
  | 'not-directory'
  /** the target exists but is not a regular file (FIFO, socket, device, directory) */
  | 'not-regular'
  /** the relative path is not a clean store-relative path */
  | 'bad-path'
  /** the file is larger than the caller's limit */
  | 'too-large'
  /** the file is not there */
  | 'missing'
  /** the mount was unmounted: nothing is created, written, renamed or removed any more */
  | 'disposed';

/** A refusal of the hardened layer. Internal: callers turn it into a warning or a refusal. */
export class LocalDirError extends Error {
  readonly failure: LocalDirFailure;
  readonly relPath: string;

  constructor(failure: LocalDirFailure, relPath: string, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LocalDirError';
    this.failure = failure;
    this.relPath = relPath;
  }
}

/** What a scan skipped without opening it. */
export interface SkippedEntry {
  /** Store-relative path; `''` for the root itself. A skipped folder stands for everything below it. */
  rel: string;
  kind: 'symlink' | 'fifo' | 'socket' | 'device' | 'unreadable-name' | 'unreadable' | 'too-long' | 'vanished';
  /** The errno code behind an `unreadable`, `too-long` or `vanished` entry. */
  code?: string | undefined;
}

export interface ScanResult {
  /** Every regular file below the root (marker and temp files excluded), with its lstat. */
  files: Map<string, BigIntStats>;
  /**
   * Entries that are not regular files or folders (never opened), and entries that could not be
   * read (permission, over-long path, vanished mid-walk). One bad entry never fails the scan.
   */
  skipped: SkippedEntry[];
  /** Regular files with our reserved temp prefix (not synced; kept aside at the end). */
  reserved: string[];
  /** Whether the root holds a marker file (content not checked here). */
  markerPresent: boolean;
}

/** True for names we reserve: the marker (at the root) and our temp files (anywhere). */
export function isReservedName(name: string, atRoot: boolean): boolean {
  return name.startsWith(TEMP_PREFIX) || (atRoot && name === MARKER_FILE);
}

/** Split a store-relative path into segments, refusing anything that could leave the root. */
export function splitRelPath(rel: string): string[] {
  const segments = rel.split('/');
  for (const s of segments) {
    if (s === '' || s === '.' || s === '..' || s.includes('\0')) {
      throw new LocalDirError('bad-path', rel, `refused path ${JSON.stringify(rel)}: not a clean store-relative path`);
    }
  }
  return segments;
}

const READ_FLAGS = fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK;
const CREATE_FLAGS = fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW;

function errCode(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : undefined;
}

export class LocalDir {
  readonly root: string;
  /**
   * Folders verified (or created) by writes flagged `freshTree`: the download into a folder this
   * process just created, before any tool runs, so they need no re-check for every file.
   */
  readonly #verifiedDirs = new Set<string>();
  #disposed = false;

  constructor(root: string) {
    if (!path.isAbsolute(root)) throw new Error(`LocalDir root must be absolute, got ${JSON.stringify(root)}`);
    this.root = path.resolve(root);
  }

  /**
   * The mount is gone: from now on every write, folder creation, rename and removal is refused
   * (except {@link removeRoot}, the unmount's own). Idempotent.
   */
  dispose(): void {
    this.#disposed = true;
  }

  /** Throw when disposed; called right before each call that changes the disk. */
  #assertLive(rel: string): void {
    if (this.#disposed) throw new LocalDirError('disposed', rel, `${this.root} is unmounted; ${rel} left untouched`);
  }

  /** Create the root folder itself (its parent must exist); a folder already there is fine. */
  async createRoot(): Promise<void> {
    this.#assertLive('.');
    try {
      await fsp.mkdir(this.root, { mode: 0o755 });
    } catch (e) {
      if (errCode(e) !== 'EEXIST') throw e;
    }
    await this.checkRoot();
  }

  /** Absolute path of a store-relative path (validated, never outside the root). */
  resolve(rel: string): string {
    return path.join(this.root, ...splitRelPath(rel));
  }

  /** Throw unless the root itself is a real directory (not a symlink to one). */
  async checkRoot(): Promise<void> {
    await this.#checkDir(this.root, '.');
  }

  /** True when the root is a real directory. */
  async rootExists(): Promise<boolean> {
    try {
      await this.checkRoot();
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Read a regular file whole, refusing it when larger than `maxBytes` (the size is checked with
   * `fstat` first, so an oversized file is never read into memory).
   */
  async readFile(rel: string, maxBytes: number = MAX_MEMORY_BYTES): Promise<{ bytes: Buffer; stat: BigIntStats }> {
    const abs = await this.#checkParents(rel);
    const fh = await this.#openForRead(abs, rel);
    try {
      const stat = await fh.stat({ bigint: true });
      if (!stat.isFile()) throw new LocalDirError('not-regular', rel, `${rel} is not a regular file; not opened for reading`);
      if (stat.size > BigInt(maxBytes)) {
        throw new LocalDirError('too-large', rel, `${rel} holds ${stat.size} bytes, over the ${maxBytes}-byte limit`);
      }
      // Read until end of file, never past one byte over the limit: a file that grew since the
      // fstat is still caught, and never read whole.
      const chunks: Buffer[] = [];
      let total = 0;
      for (;;) {
        const want = Math.min(64 * 1024, maxBytes + 1 - total);
        if (want <= 0) break;
        const chunk = Buffer.allocUnsafe(want);
        const { bytesRead } = await fh.read(chunk, 0, want, null);
        if (bytesRead === 0) break;
        chunks.push(chunk.subarray(0, bytesRead));
        total += bytesRead;
      }
      if (total > maxBytes) throw new LocalDirError('too-large', rel, `${rel} grew past the ${maxBytes}-byte limit while being read`);
      return { bytes: Buffer.concat(chunks, total), stat };
    } finally {
      await fh.close();
    }
  }

  /** `lstat` a store-relative path after checking its parent chain; undefined when missing. */
  async lstat(rel: string): Promise<BigIntStats | undefined> {
    let abs: string;
    try {
      abs = await this.#checkParents(rel);
    } catch (e) {
      if (e instanceof LocalDirError && e.failure === 'missing') return undefined;
      throw e;
    }
    try {
      return await fsp.lstat(abs, { bigint: true });
    } catch (e) {
      if (errCode(e) === 'ENOENT') return undefined;
      throw e;
    }
  }

  /**
   * Write `bytes` to `rel` atomically (temp file + rename), creating missing folders one by one.
   * `mtimeMs` backdates the file's modification time (see StatCache: a file whose mtime is safely
   * older than the moment its hash was recorded can be trusted without re-reading it).
   * Returns the stat of the written inode, taken through the still-open handle after the rename.
   */
  async writeFileAtomic(rel: string, bytes: Uint8Array, opts: { mtimeMs?: number; freshTree?: boolean } = {}): Promise<BigIntStats> {
    const segments = splitRelPath(rel);
    const name = segments[segments.length - 1]!;
    if (isReservedName(name, segments.length === 1)) {
      throw new LocalDirError('bad-path', rel, `refused to write ${rel}: the name is reserved`);
    }
    const dirSegments = segments.slice(0, -1);
    const parentAbs = path.join(this.root, ...dirSegments);
    let dir: string;
    if (opts.freshTree && this.#verifiedDirs.has(parentAbs)) {
      dir = parentAbs;
    } else {
      dir = await this.#ensureDirs(rel, dirSegments);
      if (opts.freshTree) this.#verifiedDirs.add(dir);
    }
    // A folder at the target makes the rename fail (EISDIR), mapped below: no separate check needed.
    const target = path.join(dir, name);
    const tmp = path.join(dir, TEMP_PREFIX + randomBytes(8).toString('hex'));
    this.#assertLive(rel);
    const fh = await fsp.open(tmp, CREATE_FLAGS, 0o644);
    let renamed = false;
    try {
      await fh.writeFile(bytes);
      if (opts.mtimeMs !== undefined) {
        const t = new Date(opts.mtimeMs);
        await fh.utimes(t, t);
      }
      this.#assertLive(rel);
      await fsp.rename(tmp, target);
      renamed = true;
      return await fh.stat({ bigint: true });
    } catch (e) {
      if (errCode(e) === 'EISDIR' || errCode(e) === 'ENOTEMPTY' || errCode(e) === 'EEXIST') {
        throw new LocalDirError('not-regular', rel, `${rel} is a folder here; a file of that name cannot be written`, { cause: e });
      }
      throw e;
    } finally {
      await fh.close().catch(() => {});
      if (!renamed) await fsp.unlink(tmp).catch(() => {});
    }
  }

  /**
   * Remove the regular file at `rel`, then the folders it leaves empty (never the root).
   * Refuses symlinks and non-regular files. Returns false when nothing was there.
   */
  async removeFile(rel: string): Promise<boolean> {
    const st = await this.lstat(rel);
    if (!st) return false;
    if (st.isSymbolicLink()) throw new LocalDirError('symlink', rel, `${rel} is a symlink; not removed`);
    if (!st.isFile()) throw new LocalDirError('not-regular', rel, `${rel} is not a regular file; not removed`);
    this.#assertLive(rel);
    await fsp.unlink(this.resolve(rel));
    await this.#pruneEmptyParents(rel);
    return true;
  }

  /**
   * Copy the regular file at `rel` to `destAbs` (outside the mount) by streaming, whatever its
   * size. The source is opened with the same hardening as {@link readFile}; the destination must
   * not exist yet.
   */
  async copyOut(rel: string, destAbs: string): Promise<void> {
    const abs = await this.#checkParents(rel);
    const fh = await this.#openForRead(abs, rel);
    try {
      const stat = await fh.stat();
      if (!stat.isFile()) throw new LocalDirError('not-regular', rel, `${rel} is not a regular file; not copied`);
      await pipeline(fh.createReadStream({ autoClose: false }), createWriteStream(destAbs, { flags: 'wx', mode: 0o600 }));
    } finally {
      await fh.close().catch(() => {});
    }
  }

  /** Read the marker's bytes, or undefined when it is missing, a symlink or not a regular file. */
  async readMarker(): Promise<Buffer | undefined> {
    try {
      return (await this.readFile(MARKER_FILE, 4096)).bytes;
    } catch (e) {
      if (e instanceof LocalDirError || errCode(e) === 'ENOENT') return undefined;
      throw e;
    }
  }

  /** Write the marker atomically (the reserved-name guard does not apply to this one call). */
  async writeMarker(content: string): Promise<void> {
    await this.checkRoot();
    const tmp = path.join(this.root, TEMP_PREFIX + randomBytes(8).toString('hex'));
    this.#assertLive(MARKER_FILE);
    const fh = await fsp.open(tmp, CREATE_FLAGS, 0o644);
    let renamed = false;
    try {
      await fh.writeFile(content, 'utf8');
      this.#assertLive(MARKER_FILE);
      await fsp.rename(tmp, path.join(this.root, MARKER_FILE));
      renamed = true;
    } finally {
      await fh.close().catch(() => {});
      if (!renamed) await fsp.unlink(tmp).catch(() => {});
    }
  }

  /**
   * Walk the root without following symlinks. Regular files are returned with their lstat;
   * symlinks, FIFOs, sockets and devices are listed as skipped and never opened.
   */
  async scan(): Promise<ScanResult> {
    await this.checkRoot();
    const files = new Map<string, BigIntStats>();
    const skipped: SkippedEntry[] = [];
    const reserved: string[] = [];
    let markerPresent = false;
    const pending: string[] = [''];
    const unreadable = (rel: string, e: unknown): void => {
      const code = errCode(e);
      const kind = code === 'ENAMETOOLONG' ? 'too-long' : code === 'ENOENT' || code === 'ENOTDIR' ? 'vanished' : 'unreadable';
      skipped.push({ rel, kind, code });
    };
    while (pending.length > 0) {
      const relDir = pending.pop()!;
      const absDir = relDir === '' ? this.root : path.join(this.root, relDir);
      if (relDir !== '') {
        // The folder may have been swapped for a symlink since its parent was read.
        let st: BigIntStats | undefined;
        try {
          st = await lstatOrUndefined(absDir);
        } catch (e) {
          unreadable(relDir, e);
          continue;
        }
        if (!st || !st.isDirectory()) {
          skipped.push({ rel: relDir, kind: st?.isSymbolicLink() ? 'symlink' : 'vanished' });
          continue;
        }
      }
      let entries;
      try {
        entries = await fsp.readdir(absDir, { withFileTypes: true });
      } catch (e) {
        unreadable(relDir, e);
        continue;
      }
      for (const ent of entries) {
        const name = ent.name;
        const rel = relDir === '' ? name : `${relDir}/${name}`;
        if (relDir === '' && name === MARKER_FILE) {
          markerPresent = true;
          continue;
        }
        if (name.startsWith(TEMP_PREFIX)) {
          if (ent.isFile()) reserved.push(rel);
          continue;
        }
        if (name.includes('\uFFFD')) {
          // Not valid UTF-8 on disk: no memory path can name it.
          skipped.push({ rel, kind: 'unreadable-name' });
          continue;
        }
        if (ent.isDirectory()) {
          pending.push(rel);
        } else if (ent.isFile()) {
          let st: BigIntStats | undefined;
          try {
            st = await lstatOrUndefined(path.join(absDir, name));
          } catch (e) {
            unreadable(rel, e);
            continue;
          }
          if (st?.isFile()) files.set(rel, st);
          else skipped.push({ rel, kind: st?.isSymbolicLink() ? 'symlink' : 'vanished' });
        } else if (ent.isSymbolicLink()) {
          skipped.push({ rel, kind: 'symlink' });
        } else if (ent.isFIFO()) {
          skipped.push({ rel, kind: 'fifo' });
        } else if (ent.isSocket()) {
          skipped.push({ rel, kind: 'socket' });
        } else {
          skipped.push({ rel, kind: 'device' });
        }
      }
    }
    return { files, skipped, reserved, markerPresent };
  }

  /**
   * True when the root holds nothing but (possibly) the marker and temp files. A marker that is not
   * a regular file (a folder, which may hold files, a symlink, a FIFO) is something, not a marker.
   */
  async isEmpty(): Promise<boolean> {
    let names: string[];
    try {
      names = await fsp.readdir(this.root);
    } catch (e) {
      if (errCode(e) === 'ENOENT') return true;
      throw e;
    }
    if (!names.every((n) => n === MARKER_FILE || n.startsWith(TEMP_PREFIX))) return false;
    if (!names.includes(MARKER_FILE)) return true;
    const marker = await lstatOrUndefined(path.join(this.root, MARKER_FILE));
    return marker === undefined || marker.isFile();
  }

  /** Remove the whole root (symlinks inside are unlinked, never followed). */
  async removeRoot(): Promise<void> {
    const st = await lstatOrUndefined(this.root);
    if (!st) return;
    if (!st.isDirectory()) throw new LocalDirError('not-directory', '.', `${this.root} is no longer a real folder; not removed`);
    await fsp.rm(this.root, { recursive: true, force: true });
  }

  async #openForRead(abs: string, rel: string): Promise<fsp.FileHandle> {
    try {
      return await fsp.open(abs, READ_FLAGS);
    } catch (e) {
      const code = errCode(e);
      if (code === 'ELOOP' || code === 'EMLINK') {
        throw new LocalDirError('symlink', rel, `${rel} is a symlink; never followed`, { cause: e });
      }
      if (code === 'ENOENT') throw new LocalDirError('missing', rel, `${rel} does not exist`, { cause: e });
      if (code === 'ENXIO' || code === 'EISDIR') {
        throw new LocalDirError('not-regular', rel, `${rel} is not a regular file; not opened for reading`, { cause: e });
      }
      throw e;
    }
  }

  async #checkDir(abs: string, rel: string): Promise<void> {
    const st = await lstatOrUndefined(abs);
    if (!st) throw new LocalDirError('missing', rel, `${abs} does not exist`);
    if (st.isSymbolicLink()) throw new LocalDirError('symlink', rel, `${abs} is a symlink; never followed`);
    if (!st.isDirectory()) throw new LocalDirError('not-directory', rel, `${abs} is not a folder`);
  }

  /** Check the root and every folder between it and `rel`; return the absolute path of `rel`. */
  async #checkParents(rel: string): Promise<string> {
    const segments = splitRelPath(rel);
    await this.#checkDir(this.root, '.');
    let abs = this.root;
    for (let i = 0; i < segments.length - 1; i++) {
      abs = path.join(abs, segments[i]!);
      await this.#checkDir(abs, segments.slice(0, i + 1).join('/'));
    }
    return path.join(abs, segments[segments.length - 1]!);
  }

  /** Create missing folders one component at a time; every existing one must be a real folder. */
  async #ensureDirs(rel: string, dirSegments: string[]): Promise<string> {
    await this.#checkDir(this.root, '.');
    let abs = this.root;
    for (let i = 0; i < dirSegments.length; i++) {
      const seg = dirSegments[i]!;
      if (i === 0 && seg === MARKER_FILE) {
        throw new LocalDirError('bad-path', rel, `refused ${rel}: the marker name is reserved`);
      }
      if (seg.startsWith(TEMP_PREFIX)) throw new LocalDirError('bad-path', rel, `refused ${rel}: the temp prefix is reserved`);
      abs = path.join(abs, seg);
      const partial = dirSegments.slice(0, i + 1).join('/');
      let st = await lstatOrUndefined(abs);
      if (!st) {
        this.#assertLive(rel);
        try {
          await fsp.mkdir(abs, { mode: 0o755 });
        } catch (e) {
          if (errCode(e) !== 'EEXIST') throw e;
        }
        st = await lstatOrUndefined(abs);
      }
      if (!st) throw new LocalDirError('missing', partial, `${abs} vanished while being created`);
      if (st.isSymbolicLink()) throw new LocalDirError('symlink', partial, `${partial} is a symlink; never followed`);
      if (!st.isDirectory()) {
        throw new LocalDirError('not-directory', partial, `${partial} is a file here, so ${rel} cannot be created below it`);
      }
    }
    return abs;
  }

  async #pruneEmptyParents(rel: string): Promise<void> {
    const segments = splitRelPath(rel).slice(0, -1);
    while (segments.length > 0) {
      const abs = path.join(this.root, ...segments);
      try {
        const st = await fsp.lstat(abs);
        if (!st.isDirectory() || this.#disposed) return;
        await fsp.rmdir(abs);
      } catch {
        return;
      }
      segments.pop();
    }
  }
}

async function lstatOrUndefined(abs: string): Promise<BigIntStats | undefined> {
  try {
    return await fsp.lstat(abs, { bigint: true });
  } catch (e) {
    const code = errCode(e);
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw e;
  }
}
