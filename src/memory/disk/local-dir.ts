import { randomBytes } from 'node:crypto';
import { constants as fsc, createWriteStream, lstatSync, unlinkSync, type BigIntStats } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { InternalError } from '../../errors.js';
import { API_LIMITS } from '../../internal/defaults.js';
import { FreshFileWriter } from './fresh-file-writer.js';
import { LocalDirError, errCode } from './local-dir-error.js';
import { MARKER_FILE_NAME } from '../rules/marker.js';
import { MAX_PATH_SEGMENTS, TEMP_FILE_PREFIX } from '../rules/paths.js';
import { PinnedChain, type DirIdentity } from './pinned-dir.js';
import { openFailure, readPinnedSync } from './pinned-read.js';
import type { SkippedEntry } from '../rules/scan.js';

export { LocalDirError, type LocalDirFailure } from './local-dir-error.js';

/**
 * Hardened access to one mounted store folder.
 *
 * Rules every method follows:
 * - paths are store-relative POSIX paths (`notes/todo.md`); `..`, `.`, empty segments and NUL are
 *   refused before anything touches the disk, so nothing is ever read or written outside the root;
 * - the root and every folder down to the file are opened one by one with `O_DIRECTORY|O_NOFOLLOW`
 *   and pinned by device + inode ({@link PinnedChain}); the root must stay the folder first seen
 *   (or created) at the mount path. The file is then opened, written, renamed or removed inside the
 *   pinned folder (on Linux through `/proc/self/fd`, so a folder swapped for a symlink meanwhile
 *   cannot redirect it), and the chain is re-checked right before every rename and removal;
 * - every open carries `O_NOFOLLOW` (a symlink as the last component fails with ELOOP) and reads
 *   also carry `O_NONBLOCK` followed by an `fstat` check, so a FIFO or device is never read from;
 * - writes are atomic: a temp file `.maw-tmp-<random>` created with `O_CREAT|O_EXCL|O_NOFOLLOW` in
 *   the target's own folder, written, then renamed over the target; the agent never sees half a file;
 * - the scan never throws for one entry: what it cannot read is returned in `skipped` with a reason;
 * - the unmount's recursive removal walks the same pinned folders and unlinks symlinks without
 *   following them;
 * - once {@link LocalDir.dispose} ran (the unmount), every mkdir, create, rename and unlink is
 *   refused, checked right before the call: a sync that outlives the unmount touches nothing.
 */

/** File name of the marker that binds a folder to its store. */
const MARKER_FILE = MARKER_FILE_NAME;
/** Prefix of our own temp files; reserved, never synced in either direction. */
const TEMP_PREFIX = TEMP_FILE_PREFIX;
/** The server refuses content larger than this many bytes. */
export const MAX_MEMORY_BYTES = API_LIMITS.memoryBytes;
/** Largest file {@link LocalDir.copyOut} copies out of a mount (conflict and unsaved copies). */
export const COPY_OUT_MAX_BYTES = 64 * 1024 * 1024;
/**
 * Deepest folder the scan walks, in folders below the root. A memory path has at most 20
 * segments, so nothing deeper can be a memory; deeper folders are reported, not walked.
 */
export const MAX_SCAN_DEPTH = MAX_PATH_SEGMENTS - 1;
/** Past this depth the removal moves a folder up to the root before emptying it (bounded open folders). */
const REMOVE_FLATTEN_DEPTH = 32;
/** Entries the scan examines between two yields to the event loop. */
const SCAN_YIELD_EVERY = 256;
/** What one file read by the scan counts for against {@link SCAN_YIELD_EVERY} (about four lstats). */
const SCAN_READ_COST = 4;
/** Entries the removal unlinks (synchronously) between two yields to the event loop. */
const REMOVE_BATCH = 64;
/** Most passes the removal makes over the root before giving up (an agent refilling it). */
const REMOVE_MAX_PASSES = 64;

/**
 * Called by {@link LocalDir.scan} for each regular file found, with its lstat, while its folder is
 * pinned. `read` reads the file there and then (see {@link readPinnedSync}); it throws a
 * {@link LocalDirError} (or the errno error) for a file it cannot read.
 */
export type ScanFileVisitor = (rel: string, st: BigIntStats, read: (maxBytes: number) => { bytes: Buffer; stat: BigIntStats }) => void;

export interface ScanResult {
  /**
   * Every regular file below the root (marker and temp files excluded), with its lstat; empty when
   * the scan was given a visitor, which keeps what it needs of each file.
   */
  files: Map<string, BigIntStats>;
  /**
   * Entries that are not regular files or folders (never opened), and entries that could not be
   * read (permission, vanished mid-walk, deeper than a memory path reaches). One bad entry never
   * fails the scan.
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

const SKIP_REASON: Record<'symlink' | 'fifo' | 'socket' | 'device', string> = {
  symlink: 'a symlink; never followed and never synced',
  fifo: 'a FIFO; never opened and never synced',
  socket: 'a socket; never opened and never synced',
  device: 'a device; never opened and never synced',
};

function specialKind(st: { isSymbolicLink(): boolean; isFIFO(): boolean; isSocket(): boolean }): 'symlink' | 'fifo' | 'socket' | 'device' {
  return st.isSymbolicLink() ? 'symlink' : st.isFIFO() ? 'fifo' : st.isSocket() ? 'socket' : 'device';
}

export class LocalDir {
  readonly root: string;
  /** Identity of the root folder, taken the first time it was opened (or when it was created). */
  #rootId: DirIdentity | undefined;
  #disposed = false;

  constructor(root: string) {
    if (!path.isAbsolute(root)) throw new InternalError(`LocalDir root must be absolute, got ${JSON.stringify(root)}`);
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

  /**
   * Create the root folder itself (its parent must exist); a folder already there is fine. The
   * folder found (or made) becomes the one every later operation must find at the root.
   */
  async createRoot(): Promise<void> {
    this.#assertLive('.');
    try {
      await fsp.mkdir(this.root, { mode: 0o755 });
    } catch (e) {
      if (errCode(e) !== 'EEXIST') throw e;
    }
    const chain = await PinnedChain.openRoot(this.root, undefined);
    this.#rootId = chain.rootIdentity;
    await chain.close();
  }

  /** Absolute path of a store-relative path (validated, never outside the root). */
  resolve(rel: string): string {
    return path.join(this.root, ...splitRelPath(rel));
  }

  /** Throw unless the root itself is a real directory (not a symlink to one), the one first seen. */
  async checkRoot(): Promise<void> {
    await (await this.#pin([], '.')).close();
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
   * How {@link #pin} goes down to `segments[i]`: with `create`, a reserved name is refused and a
   * missing folder is made (refused once disposed).
   */
  #descent(segments: readonly string[], i: number, rel: string, create: boolean): { create?: true; beforeCreate?: () => void } {
    if (!create) return {};
    const seg = segments[i]!;
    if (isReservedName(seg, i === 0)) throw new LocalDirError('bad-path', rel, `refused ${rel}: ${seg} is a reserved name`);
    return { create: true, beforeCreate: () => this.#assertLive(rel) };
  }

  /**
   * Open and pin the root and the folders `segments` below it. With `create`, missing folders are
   * made one by one (each refused once disposed, reserved names refused).
   */
  async #pin(segments: readonly string[], rel: string, create = false): Promise<PinnedChain> {
    const chain = await PinnedChain.openRoot(this.root, this.#rootId);
    this.#rootId ??= chain.rootIdentity;
    try {
      for (let i = 0; i < segments.length; i++) await chain.descend(segments[i]!, this.#descent(segments, i, rel, create));
      return chain;
    } catch (e) {
      await chain.close();
      throw e;
    }
  }

  /** {@link #pin} with synchronous calls (a writer pinning many folders in a row). */
  #pinSync(segments: readonly string[], rel: string, create = false): PinnedChain {
    const chain = PinnedChain.openRootSync(this.root, this.#rootId);
    this.#rootId ??= chain.rootIdentity;
    try {
      for (let i = 0; i < segments.length; i++) chain.descendSync(segments[i]!, this.#descent(segments, i, rel, create));
      return chain;
    } catch (e) {
      chain.closeSync();
      throw e;
    }
  }

  /** Pin the parent folders of `rel`; returns the chain and the file's own name. */
  async #pinParent(rel: string, create = false): Promise<{ chain: PinnedChain; name: string }> {
    const segments = splitRelPath(rel);
    const chain = await this.#pin(segments.slice(0, -1), rel, create);
    return { chain, name: segments[segments.length - 1]! };
  }

  /**
   * Read a regular file whole, refusing it when larger than `maxBytes` (the size is checked with
   * `fstat` first, so an oversized file is never read into memory).
   */
  async readFile(rel: string, maxBytes: number = MAX_MEMORY_BYTES): Promise<{ bytes: Buffer; stat: BigIntStats }> {
    const { chain, name } = await this.#pinParent(rel);
    try {
      return readPinnedSync(chain, name, rel, maxBytes);
    } finally {
      await chain.close();
    }
  }

  /** `lstat` a store-relative path inside its pinned parent; undefined when missing. */
  async lstat(rel: string): Promise<BigIntStats | undefined> {
    let pinned: { chain: PinnedChain; name: string };
    try {
      pinned = await this.#pinParent(rel);
    } catch (e) {
      if (e instanceof LocalDirError && e.failure === 'missing') return undefined;
      throw e;
    }
    try {
      return await fsp.lstat(pinned.chain.entry(pinned.name), { bigint: true });
    } catch (e) {
      if (errCode(e) === 'ENOENT') return undefined;
      throw e;
    } finally {
      await pinned.chain.close();
    }
  }

  /**
   * Write `bytes` to `rel` atomically (temp file + rename) inside its pinned folder, creating
   * missing folders one by one. `mtimeMs` backdates the file's modification time (see StatCache:
   * a file whose mtime is safely older than the moment its hash was recorded can be trusted
   * without re-reading it). Returns the stat of the written inode, taken through the still-open
   * handle after the rename. A tree being materialised is written faster by {@link freshWriter}.
   */
  async writeFileAtomic(rel: string, bytes: Uint8Array, opts: { mtimeMs?: number } = {}): Promise<BigIntStats> {
    const segments = splitRelPath(rel);
    const name = segments[segments.length - 1]!;
    if (isReservedName(name, segments.length === 1)) {
      throw new LocalDirError('bad-path', rel, `refused to write ${rel}: the name is reserved`);
    }
    this.#assertLive(rel);
    const { chain } = await this.#pinParent(rel, true);
    try {
      return await this.#writeIn(chain, name, rel, bytes, opts.mtimeMs);
    } finally {
      await chain.close();
    }
  }

  /**
   * A writer for the files of a tree being materialised (the download at mount): folders pinned
   * once, each file written atomically with synchronous calls (see {@link FreshFileWriter}). Close
   * it when done.
   */
  freshWriter(): FreshFileWriter {
    return new FreshFileWriter({
      split: (rel) => {
        const segments = splitRelPath(rel);
        const name = segments[segments.length - 1]!;
        if (isReservedName(name, segments.length === 1)) {
          throw new LocalDirError('bad-path', rel, `refused to write ${rel}: the name is reserved`);
        }
        return { folders: segments.slice(0, -1), name };
      },
      checkName: (rel, name, folder) => {
        if (name === '' || name === '.' || name === '..' || name.includes('\0')) {
          throw new LocalDirError('bad-path', rel, `refused path ${JSON.stringify(rel)}: not a clean store-relative path`);
        }
        if (isReservedName(name, folder === '')) throw new LocalDirError('bad-path', rel, `refused to write ${rel}: the name is reserved`);
      },
      pin: (folders, rel) => this.#pinSync(folders, rel, true),
      assertLive: (rel) => this.#assertLive(rel),
    });
  }

  /** Temp file + rename inside the pinned folder; the chain is re-checked right before the rename. */
  async #writeIn(chain: PinnedChain, name: string, rel: string, bytes: Uint8Array | string, mtimeMs?: number): Promise<BigIntStats> {
    const tmp = chain.entry(TEMP_PREFIX + randomBytes(8).toString('hex'));
    this.#assertLive(rel);
    const fh = await fsp.open(tmp, CREATE_FLAGS, 0o644);
    let renamed = false;
    try {
      await fh.writeFile(bytes);
      if (mtimeMs !== undefined) {
        const t = new Date(mtimeMs);
        await fh.utimes(t, t);
      }
      this.#assertLive(rel);
      await chain.verify();
      // A folder at the target makes the rename fail (EISDIR), mapped below: no separate check needed.
      await fsp.rename(tmp, chain.entry(name));
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
    let pinned: { chain: PinnedChain; name: string };
    try {
      pinned = await this.#pinParent(rel);
    } catch (e) {
      if (e instanceof LocalDirError && e.failure === 'missing') return false;
      throw e;
    }
    const { chain, name } = pinned;
    try {
      const st = await fsp.lstat(chain.entry(name)).catch((e: unknown) => {
        if (errCode(e) === 'ENOENT') return undefined;
        throw e;
      });
      if (!st) return false;
      if (st.isSymbolicLink()) throw new LocalDirError('symlink', rel, `${rel} is a symlink; not removed`);
      if (!st.isFile()) throw new LocalDirError('not-regular', rel, `${rel} is not a regular file; not removed`);
      this.#assertLive(rel);
      await chain.verify();
      await fsp.unlink(chain.entry(name));
      // Prune the folders left empty, deepest first; rmdir removes only empty real folders.
      while (chain.depth > 0 && !this.#disposed) {
        const folder = path.posix.basename(chain.rel);
        await chain.ascend();
        try {
          await chain.verify();
          await fsp.rmdir(chain.entry(folder));
        } catch {
          break;
        }
      }
      return true;
    } finally {
      await chain.close();
    }
  }

  /**
   * Copy the regular file at `rel` to `destAbs` (outside the mount) by streaming. The source is
   * opened with the same hardening as {@link readFile}; the destination must not exist yet. A file
   * larger than `maxBytes` (default {@link COPY_OUT_MAX_BYTES}) is refused from its size before a
   * byte is copied, so a planted giant (or sparse) file cannot fill the disk it is copied to.
   */
  async copyOut(rel: string, destAbs: string, opts: { maxBytes?: number } = {}): Promise<void> {
    const maxBytes = opts.maxBytes ?? COPY_OUT_MAX_BYTES;
    const fh = await this.#openForRead(rel);
    try {
      const stat = await fh.stat();
      if (!stat.isFile()) throw new LocalDirError('not-regular', rel, `${rel} is not a regular file; not copied`);
      if (stat.size > maxBytes) {
        throw new LocalDirError(
          'too-large',
          rel,
          `${rel} holds ${stat.size} bytes, over the ${maxBytes} bytes a copy may take; not copied`,
        );
      }
      await pipeline(fh.createReadStream({ autoClose: false, end: maxBytes }), createWriteStream(destAbs, { flags: 'wx', mode: 0o600 }));
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
    this.#assertLive(MARKER_FILE);
    const chain = await this.#pin([], MARKER_FILE);
    try {
      await this.#writeIn(chain, MARKER_FILE, MARKER_FILE, content);
    } finally {
      await chain.close();
    }
  }

  /**
   * Walk the root without following symlinks, each folder opened inside its pinned parent.
   * Regular files are returned with their lstat. Nothing below the root makes the scan throw:
   * symlinks, FIFOs, sockets and devices, entries that cannot be read, entries that vanish while
   * being scanned, names that are not UTF-8 and folders deeper than a memory path can reach are
   * returned in `skipped` with a reason, and never opened. Only a root that is missing, not a real
   * folder or not the folder first seen there throws. `onFile` sees each regular file as it is
   * found, and may read it in its pinned folder (one pin per folder for the whole scan).
   */
  async scan(onFile?: ScanFileVisitor): Promise<ScanResult> {
    const files = new Map<string, BigIntStats>();
    const skipped: SkippedEntry[] = [];
    const reserved: string[] = [];
    let markerPresent = false;
    const vanished = (rel: string, code?: string): void =>
      void skipped.push({ rel, kind: 'vanished', code, reason: 'vanished while the folder was scanned; looked at again next sync' });
    const unreadable = (rel: string, e: unknown, what: string): void => {
      const code = e instanceof LocalDirError ? e.failure : errCode(e);
      const kind = code === 'ENAMETOOLONG' ? 'too-long' : 'unreadable';
      skipped.push({ rel, kind, code, reason: `${what} (${code ?? String(e)})` });
    };
    const chain = await this.#pin([], '.');
    let sinceYield = 0;
    const walk = async (depth: number): Promise<void> => {
      const relDir = chain.rel;
      let entries: import('node:fs').Dirent[];
      try {
        entries = await fsp.readdir(chain.self(), { withFileTypes: true });
      } catch (e) {
        if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') vanished(relDir, errCode(e));
        else unreadable(relDir, e, 'folder could not be listed; its files are left as they are');
        return;
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
          skipped.push({ rel, kind: 'unreadable-name', reason: 'the name is not valid UTF-8, so no memory path can name it' });
          continue;
        }
        // A synchronous lstat (a dentry lookup: microseconds, where a thread-pool round trip costs
        // far more), with a yield to the event loop every SCAN_YIELD_EVERY entries.
        if (++sinceYield >= SCAN_YIELD_EVERY) {
          sinceYield = 0;
          await new Promise<void>((resolve) => setImmediate(resolve));
        }
        let st: BigIntStats;
        try {
          st = lstatSync(chain.entry(name), { bigint: true });
        } catch (e) {
          if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') vanished(rel, errCode(e));
          else unreadable(rel, e, 'could not be examined');
          continue;
        }
        if (st.isFile()) {
          if (onFile === undefined) files.set(rel, st);
          else {
            onFile(rel, st, (maxBytes) => {
              sinceYield += SCAN_READ_COST;
              return readPinnedSync(chain, name, rel, maxBytes);
            });
          }
        } else if (st.isDirectory()) {
          if (depth >= MAX_SCAN_DEPTH) {
            skipped.push({
              rel,
              kind: 'too-deep',
              reason: `folder ${depth + 1} levels deep; a memory path has at most ${MAX_PATH_SEGMENTS} segments, so nothing below it is synced`,
            });
            continue;
          }
          try {
            await chain.descend(name);
          } catch (e) {
            if (e instanceof LocalDirError && e.failure === 'symlink') skipped.push({ rel, kind: 'symlink', reason: SKIP_REASON.symlink });
            else if (e instanceof LocalDirError && (e.failure === 'missing' || e.failure === 'not-directory')) vanished(rel, e.failure);
            else unreadable(rel, e, 'folder could not be opened');
            continue;
          }
          try {
            await walk(depth + 1);
          } finally {
            await chain.ascend();
          }
        } else {
          const kind = specialKind(st);
          skipped.push({ rel, kind, reason: SKIP_REASON[kind] });
        }
      }
    };
    try {
      await walk(0);
    } finally {
      await chain.close();
    }
    return { files, skipped, reserved, markerPresent };
  }

  /**
   * True when the root holds nothing but (possibly) the marker and temp files. A marker that is not
   * a regular file (a folder, which may hold files, a symlink, a FIFO) is something, not a marker.
   */
  async isEmpty(): Promise<boolean> {
    let chain: PinnedChain;
    try {
      chain = await this.#pin([], '.');
    } catch (e) {
      if (e instanceof LocalDirError && e.failure === 'missing') return true;
      throw e;
    }
    try {
      const names = await fsp.readdir(chain.self());
      if (!names.every((n) => n === MARKER_FILE || n.startsWith(TEMP_PREFIX))) return false;
      if (!names.includes(MARKER_FILE)) return true;
      const marker = await fsp.lstat(chain.entry(MARKER_FILE)).catch(() => undefined);
      return marker === undefined || marker.isFile();
    } finally {
      await chain.close();
    }
  }

  /**
   * Remove the whole root. Every folder is emptied inside its pinned self, re-checked before each
   * removal; symlinks are unlinked, never followed; a folder swapped for a symlink meanwhile is
   * unlinked as a symlink. The root goes last, only if it is still the folder first seen there.
   */
  async removeRoot(): Promise<void> {
    let chain: PinnedChain;
    try {
      chain = await this.#pin([], '.');
    } catch (e) {
      if (e instanceof LocalDirError && e.failure === 'missing') return;
      if (e instanceof LocalDirError) {
        throw new LocalDirError(e.failure, '.', `${this.root} is no longer a real folder; not removed`, { cause: e });
      }
      throw e;
    }
    try {
      for (let pass = 0; ; pass++) {
        const moved = await this.#emptyFolder(chain, 0);
        if (!moved) break;
        if (pass >= REMOVE_MAX_PASSES) {
          throw new LocalDirError('not-directory', '.', `${this.root} kept filling up while being removed; remove it by hand`);
        }
      }
      await chain.verify();
      await fsp.rmdir(this.root);
    } finally {
      await chain.close();
    }
  }

  /**
   * Remove everything inside the pinned folder. Returns true when a folder too deep to descend
   * into was moved up to the root instead (the caller empties the root again).
   */
  async #emptyFolder(chain: PinnedChain, depth: number): Promise<boolean> {
    let movedUp = false;
    const entries = await fsp.readdir(chain.self(), { withFileTypes: true });
    // Files, symlinks and special files first, with synchronous calls (the folder re-checked right
    // before each unlink), a batch at a time between two yields to the event loop. An entry that
    // became a folder since the listing is handled with the folders.
    const folders = entries.filter((e) => e.isDirectory()).map((e) => e.name);
    const others = entries.filter((e) => !e.isDirectory()).map((e) => e.name);
    for (let i = 0; i < others.length; i += REMOVE_BATCH) {
      if (i > 0) await new Promise<void>((resolve) => setImmediate(resolve));
      for (const name of others.slice(i, i + REMOVE_BATCH)) {
        chain.verifySync();
        try {
          unlinkSync(chain.entry(name));
        } catch (e) {
          if (errCode(e) === 'ENOENT') continue;
          if (errCode(e) !== 'EISDIR' && errCode(e) !== 'EPERM') throw e;
          folders.push(name);
        }
      }
    }
    for (const name of folders) {
      const entry = chain.entry(name);
      const st = await fsp.lstat(entry).catch((e: unknown) => {
        if (errCode(e) === 'ENOENT') return undefined;
        throw e;
      });
      if (st === undefined) continue;
      if (!st.isDirectory()) {
        await chain.verify();
        await unlinkIfThere(entry);
        continue;
      }
      if (depth >= REMOVE_FLATTEN_DEPTH) {
        await chain.verify();
        await fsp.rename(entry, chain.rootEntry(`${TEMP_PREFIX}rm-${randomBytes(8).toString('hex')}`));
        movedUp = true;
        continue;
      }
      try {
        await chain.descend(name);
      } catch (e) {
        // Swapped for a symlink or a file since the lstat: it is not a folder to walk into.
        if (e instanceof LocalDirError && (e.failure === 'symlink' || e.failure === 'not-directory')) {
          await chain.verify();
          await unlinkIfThere(entry);
          continue;
        }
        if (e instanceof LocalDirError && e.failure === 'missing') continue;
        throw e;
      }
      try {
        movedUp = (await this.#emptyFolder(chain, depth + 1)) || movedUp;
      } finally {
        await chain.ascend();
      }
      await chain.verify();
      await fsp.rmdir(entry).catch(async (e: unknown) => {
        // A symlink put in its place after it was emptied: unlinked, never followed.
        if (errCode(e) === 'ENOTDIR') return unlinkIfThere(entry);
        if (errCode(e) !== 'ENOENT') throw e;
      });
    }
    return movedUp;
  }

  /** Open `rel` for reading inside its pinned parent folder; never follows, never blocks. */
  async #openForRead(rel: string): Promise<fsp.FileHandle> {
    const { chain, name } = await this.#pinParent(rel);
    try {
      return await fsp.open(chain.entry(name), READ_FLAGS);
    } catch (e) {
      throw openFailure(e, rel);
    } finally {
      await chain.close();
    }
  }
}

async function unlinkIfThere(abs: string): Promise<void> {
  try {
    await fsp.unlink(abs);
  } catch (e) {
    if (errCode(e) !== 'ENOENT') throw e;
  }
}
