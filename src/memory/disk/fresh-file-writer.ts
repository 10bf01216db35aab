import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants as fsc,
  futimesSync,
  linkSync,
  lstatSync,
  openSync,
  renameSync,
  unlinkSync,
  writeSync,
  type BigIntStats,
} from 'node:fs';
import { LocalDirError, errCode } from './local-dir-error.js';
import { asWrittenStat } from '../rules/file-stat.js';
import { TEMP_FILE_PREFIX } from '../rules/paths.js';
import type { DirIdentity, PinnedChain } from './pinned-dir.js';

/**
 * Writes the files of a tree being materialised (a store's download at mount, into a folder this
 * mount created) with few calls per file:
 * - each folder is opened (created when missing) and pinned once, then kept open for the writer's
 *   life: the files of a folder are written through `/proc/self/fd/<fd>/` of that one pin (on
 *   Linux), so a folder swapped for a symlink after it was opened cannot redirect them;
 * - each file is created directly under its name with `O_CREAT|O_EXCL|O_NOFOLLOW`, right after the
 *   whole chain was re-checked, then written, its mtime backdated, and closed: no temp name, no
 *   rename, and no stat (the caller notes what it wrote for the stat cache, which checks the file's
 *   first stat against it, and reads back the ctime of a batch's last file with
 *   {@link FreshFileWriter.lastWrittenCtimeNs}; see `StatCache.expect`). A file a crash leaves half
 *   written is never taken for content: the store's journal entry says "downloading" until every
 *   file is written, and a leftover in that state is cleared whole and downloaded again (see
 *   `adoptVerdict`), never reconciled;
 * - an entry already at the name (something placed in the folder while it downloads) makes the
 *   create fail: a file or symlink there is replaced atomically (temp file + rename, never followed),
 *   a folder there is reported as `not-regular`;
 * - the calls are synchronous: on a local disk each takes microseconds, where a round trip through
 *   the thread pool costs far more. Callers write a bounded batch and then yield to the event loop;
 * - pinned folders are closed least recently used first past {@link MAX_OPEN_FOLDERS} open
 *   descriptors, and all of them by {@link close};
 * - between {@link beginBatch} and {@link endBatch} (a run of synchronous writes with no yield to
 *   the event loop), each folder chain is checked at its first write of the batch and again at the
 *   batch's end, not before every file: a folder moved or swapped during the batch is found at its
 *   end, and the batch's writes fail there, as a per-file check finds a swap made between its check
 *   and its create only at the next file. The store root all chains start from is checked once at
 *   the batch's first check and once at its end, not once per chain. Outside a batch, or where
 *   folders are reached by path rather than through their descriptor, every write checks its chain.
 */

/**
 * Folder descriptors one writer keeps open at most (one per folder of each cached chain): enough
 * for a dozen top-level folders written in turn, while 16 sessions of 8 stores mounting at once
 * stay far below common descriptor limits.
 */
export const MAX_OPEN_FOLDERS = 24;

const CREATE_FLAGS = fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW;

export interface FreshFileWriterDeps {
  /** Split a store-relative path for writing, refusing unclean paths and reserved names. */
  split(rel: string): { folders: string[]; name: string };
  /**
   * Refuse `name` as the file name of `rel` (in the folder `folder`, `''` for the root) when it is
   * not a clean segment or a reserved name: what {@link split} checks of the last segment, for a
   * file whose folder is pinned already (its folders were checked when they were).
   */
  checkName(rel: string, name: string, folder: string): void;
  /** Pin the folders below the root, creating missing ones (synchronous calls). */
  pin(folders: string[], rel: string): PinnedChain;
  /** Throw once the folder is unmounted; called right before each call that changes the disk. */
  assertLive(rel: string): void;
}

export class FreshFileWriter {
  readonly #deps: FreshFileWriterDeps;
  /** Pinned folders by store-relative folder path, least recently used first. */
  readonly #chains = new Map<string, PinnedChain>();
  /** The folder of the last write: the most recently used already, so the order needs no update. */
  #lastKey: string | undefined;
  /** Unique per writer: temp names need only a counter after it. */
  readonly #tempStem = `${TEMP_FILE_PREFIX}${randomBytes(6).toString('hex')}-`;
  #tempCount = 0;
  #openFolders = 0;
  /** Chains checked since {@link beginBatch}; undefined outside a batch. */
  #batchChecked: Set<PinnedChain> | undefined;
  /** The root's identity as the batch's first check found it; undefined until then. */
  #batchRoot: DirIdentity | undefined;
  /** The failed check of a chain closed during the batch, thrown at the batch's end. */
  #batchFailure: { error: unknown } | undefined;
  /** The last file written, as written (no object per write): {@link lastWrittenCtimeNs} reads its ctime back. */
  #lastChain: PinnedChain | undefined;
  #lastName = '';
  #lastSize = 0;
  #lastMtimeMs = 0;
  /** A link was refused for a reason that holds for every file here (another filesystem, no links allowed). */
  #linksRefused = false;

  constructor(deps: FreshFileWriterDeps) {
    this.#deps = deps;
  }

  /** {@link writeNow} as a promise (a refusal rejects it). */
  async write(rel: string, bytes: Uint8Array, mtimeMs: number): Promise<void> {
    this.writeNow(rel, bytes, mtimeMs);
  }

  /**
   * Write `bytes` to `rel`, its mtime set to `mtimeMs`, with synchronous calls only (a folder not
   * pinned yet is pinned, and created, the same way). Throws a {@link LocalDirError} on a refusal.
   */
  writeNow(rel: string, bytes: Uint8Array, mtimeMs: number): void {
    const { key, chain, name } = this.#chainOf(rel);
    try {
      this.#writeIn(chain, name, rel, bytes, mtimeMs);
      this.#lastChain = chain;
      this.#lastName = name;
      this.#lastSize = bytes.length;
      this.#lastMtimeMs = mtimeMs;
    } catch (e) {
      // A folder found replaced is pinned again (and refused again) by the next write, never reused.
      if (e instanceof LocalDirError && e.failure === 'replaced') this.#drop(key);
      throw e;
    }
  }

  /**
   * Make `rel` a hard link to the file at `source` (same filesystem), with the checks a write
   * makes, and return the link's stat; `undefined` when no link was made and the caller is to write
   * the bytes instead: something is at the name already, `source` is gone, or this filesystem (or
   * the pair of folders) allows no link here, after which this writer makes no more attempts. A
   * linked file is not a write: {@link lastWrittenCtimeNs} still speaks of the last file written.
   */
  linkNow(rel: string, source: string): BigIntStats | undefined {
    if (this.#linksRefused) return undefined;
    const { key, chain, name } = this.#chainOf(rel);
    const target = chain.entry(name);
    try {
      this.#checkChain(chain, rel);
      linkSync(source, target);
    } catch (e) {
      if (e instanceof LocalDirError && e.failure === 'replaced') this.#drop(key);
      if (e instanceof LocalDirError) throw e;
      const code = errCode(e);
      if (code === 'EEXIST' || code === 'ENOENT') return undefined;
      if (code === 'EXDEV' || code === 'EPERM' || code === 'EMLINK' || code === 'ENOTSUP' || code === 'EOPNOTSUPP' || code === 'EACCES') {
        this.#linksRefused = true;
        return undefined;
      }
      throw e;
    }
    try {
      const st = lstatSync(target, { bigint: true });
      if (st.isFile()) return st;
    } catch {
      // Gone at once: written instead, below.
    }
    unlinkQuietly(chain, target);
    return undefined;
  }

  /** The pinned chain of `rel`'s folder (pinned now, and its folders created, when it is not yet) and the file's name. */
  #chainOf(rel: string): { key: string; chain: PinnedChain; name: string } {
    const slash = rel.lastIndexOf('/');
    const key = slash < 0 ? '' : rel.slice(0, slash);
    let chain = this.#chains.get(key);
    let name: string;
    if (chain !== undefined) {
      name = rel.slice(slash + 1);
      this.#deps.checkName(rel, name, key);
      if (this.#lastKey !== key) {
        this.#chains.delete(key);
        this.#chains.set(key, chain);
      }
    } else {
      const split = this.#deps.split(rel);
      name = split.name;
      this.#deps.assertLive(rel);
      chain = this.#deps.pin(split.folders, rel);
      this.#keep(key, chain);
    }
    this.#lastKey = key;
    return { key, chain, name };
  }

  /** Start a batch: from here each chain is checked once, at its first write. */
  beginBatch(): void {
    if (this.#batchChecked !== undefined) return;
    this.#batchChecked = new Set();
    this.#batchRoot = undefined;
    this.#batchFailure = undefined;
  }

  /** Check `chain`, its root only when no check of this run of synchronous calls has yet. */
  #verifyInBatch(chain: PinnedChain): void {
    // A closed chain reaches nothing any more: there is nothing to check through it.
    if (!chain.isOpen) return;
    chain.verifySync(this.#batchRoot !== undefined ? { rootCheckedAs: this.#batchRoot } : {});
    this.#batchRoot ??= chain.rootIdentity;
  }

  /** {@link endBatchNow} as a promise (a failed check rejects it). */
  async endBatch(opts: { check?: boolean } = {}): Promise<void> {
    this.endBatchNow(opts);
  }

  /**
   * End the batch: check again every chain written through during it. Throws `replaced` (a
   * {@link LocalDirError}) when one was moved or swapped; that chain is pinned again by its next
   * write. A batch ended after a failed write may skip the check (`check: false`).
   */
  endBatchNow(opts: { check?: boolean } = {}): void {
    const checked = this.#batchChecked;
    const failure = this.#batchFailure;
    this.#batchChecked = undefined;
    this.#batchFailure = undefined;
    // The end's checks start afresh: the root is checked again, once.
    this.#batchRoot = undefined;
    if (checked === undefined || opts.check === false) return;
    // A chain closed during the batch was checked as it closed; its failure counts as the end's.
    if (failure !== undefined) throw failure.error;
    for (const chain of checked) {
      try {
        this.#verifyInBatch(chain);
      } catch (e) {
        for (const [key, held] of this.#chains) if (held === chain) this.#drop(key);
        throw e;
      }
    }
  }

  /**
   * The ctime, on the filesystem's clock, of the last file written, read back with one `lstat`
   * (every file written before it has a ctime no later; a write that failed wrote nothing);
   * undefined before any write, once its folder was closed, or when what is at its name now is not
   * the file as written (size, mtime).
   */
  lastWrittenCtimeNs(): bigint | undefined {
    const chain = this.#lastChain;
    if (chain === undefined || !chain.isOpen) return undefined;
    try {
      const st = lstatSync(chain.entry(this.#lastName), { bigint: true });
      return st.isFile() && asWrittenStat(st, this.#lastSize, this.#lastMtimeMs) ? st.ctimeNs : undefined;
    } catch {
      return undefined;
    }
  }

  /** Close every pinned folder. The writer may be used again (folders are pinned again). */
  async close(): Promise<void> {
    for (const key of [...this.#chains.keys()]) this.#drop(key);
  }

  /** The checks before a file is made in `chain`: the store still mounted, the chain as pinned (once per batch through a descriptor). */
  #checkChain(chain: PinnedChain, rel: string): void {
    this.#deps.assertLive(rel);
    // Reached by path (no descriptor route), the chain is checked before every write.
    if (this.#batchChecked === undefined || !chain.throughDescriptor) {
      chain.verifySync();
    } else if (!this.#batchChecked.has(chain)) {
      this.#verifyInBatch(chain);
      this.#batchChecked.add(chain);
    }
  }

  #writeIn(chain: PinnedChain, name: string, rel: string, bytes: Uint8Array, mtimeMs: number): void {
    const target = chain.entry(name);
    this.#checkChain(chain, rel);
    let fd: number;
    try {
      fd = openSync(target, CREATE_FLAGS, 0o644);
    } catch (e) {
      if (errCode(e) === 'EEXIST') return this.#replaceIn(chain, name, rel, bytes, mtimeMs);
      throw e;
    }
    let written = false;
    try {
      fill(fd, bytes, mtimeMs);
      written = true;
    } finally {
      closeSync(fd);
      // Created by this call (O_EXCL): a file left half written is removed, never kept.
      if (!written) unlinkQuietly(chain, target);
    }
  }

  /** Temp file + rename over what is at `name`, the chain re-checked right before the rename. */
  #replaceIn(chain: PinnedChain, name: string, rel: string, bytes: Uint8Array, mtimeMs: number): void {
    const tmp = chain.entry(`${this.#tempStem}${(this.#tempCount++).toString(36)}`);
    this.#deps.assertLive(rel);
    const fd = openSync(tmp, CREATE_FLAGS, 0o644);
    let renamed = false;
    try {
      fill(fd, bytes, mtimeMs);
      this.#deps.assertLive(rel);
      chain.verifySync();
      // A folder at the target makes the rename fail (EISDIR), mapped below.
      renameSync(tmp, chain.entry(name));
      renamed = true;
    } catch (e) {
      const code = errCode(e);
      if (code === 'EISDIR' || code === 'ENOTEMPTY' || code === 'EEXIST') {
        throw new LocalDirError('not-regular', rel, `${rel} is a folder here; a file of that name cannot be written`, { cause: e });
      }
      throw e;
    } finally {
      closeSync(fd);
      if (!renamed) unlinkQuietly(chain, tmp);
    }
  }

  #keep(key: string, chain: PinnedChain): void {
    this.#chains.set(key, chain);
    this.#openFolders += chain.openFolders;
    for (const oldest of this.#chains.keys()) {
      if (this.#openFolders <= MAX_OPEN_FOLDERS || oldest === key) break;
      this.#checkBeforeClosing(oldest);
      this.#drop(oldest);
    }
  }

  /**
   * A chain written through in this batch and closed before its end (least recently used past the
   * open-folder bound) is checked as it closes, since the end's check cannot reach it any more; a
   * failure is kept for the end, where the batch fails as for any folder swapped during it.
   */
  #checkBeforeClosing(key: string): void {
    const chain = this.#chains.get(key);
    if (chain === undefined || this.#batchChecked?.delete(chain) !== true) return;
    try {
      this.#verifyInBatch(chain);
    } catch (e) {
      this.#batchFailure ??= { error: e };
    }
  }

  #drop(key: string): void {
    const chain = this.#chains.get(key);
    if (chain === undefined) return;
    if (this.#lastChain === chain) this.#lastChain = undefined;
    this.#chains.delete(key);
    if (this.#lastKey === key) this.#lastKey = undefined;
    this.#openFolders -= chain.openFolders;
    chain.closeSync();
  }
}

/** Write all of `bytes` to `fd` and backdate its mtime to `mtimeMs`. */
function fill(fd: number, bytes: Uint8Array, mtimeMs: number): void {
  for (let off = 0; off < bytes.length;) off += writeSync(fd, bytes, off, bytes.length - off);
  const t = mtimeMs / 1000;
  futimesSync(fd, t, t);
}

/** Remove a file this writer created, unless the chain leading to it was moved or replaced. */
function unlinkQuietly(chain: PinnedChain, entry: string): void {
  try {
    chain.verifySync();
    unlinkSync(entry);
  } catch {
    // Already gone, or the folder with it: nothing to clean (a failed mount removes its folder).
  }
}
