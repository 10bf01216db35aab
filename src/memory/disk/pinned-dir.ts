import { closeSync, constants as fsc, existsSync, fstatSync, lstatSync, mkdirSync, openSync, type BigIntStats } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { LocalDirError, errCode } from './local-dir-error.js';

/**
 * A chain of open folders from a store root down to one folder below it, each opened with
 * `O_DIRECTORY|O_NOFOLLOW` and identified by device + inode right after opening.
 *
 * On Linux every operation inside the pinned folder goes through `/proc/self/fd/<fd>/<name>`:
 * the kernel resolves that path from the open folder itself, so a folder of the path swapped for
 * a symlink after it was opened cannot redirect the operation anywhere else. Elsewhere the
 * operation uses the absolute path, and {@link PinnedChain.verify} (an `lstat` of every folder of
 * the chain compared with the identities taken when they were opened) closes most of the window.
 * Callers run `verify()` right before every rename, removal and final write, so a folder moved
 * out of the mount since it was opened is refused on both kinds of host.
 */

/** Device and inode of a folder: what stays the same while a name is swapped around it. */
export interface DirIdentity {
  dev: bigint;
  ino: bigint;
}

const DIR_FLAGS = fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW;

let procFdOverride: boolean | undefined;
let procFdDetected: boolean | undefined;

/** True when `/proc/self/fd/<fd>/<name>` resolves from an open folder (Linux with `/proc` mounted). */
export function procFdAvailable(): boolean {
  if (procFdOverride !== undefined) return procFdOverride;
  procFdDetected ??= process.platform === 'linux' && existsSync('/proc/self/fd');
  return procFdDetected;
}

/**
 * Force the portable (`lstat` re-check) scheme on or off; `undefined` restores detection.
 * @internal tests run both schemes on one host
 */
export function forceProcFd(value: boolean | undefined): void {
  procFdOverride = value;
}

function identityOf(st: BigIntStats): DirIdentity {
  return { dev: st.dev, ino: st.ino };
}

function sameIdentity(a: DirIdentity, b: DirIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino;
}

interface Link {
  /** The folder's descriptor. */
  fd: number;
  /** The handle owning `fd` when opened through the promise API; undefined when opened synchronously. */
  fh: fsp.FileHandle | undefined;
  id: DirIdentity;
  /** Absolute path the folder had when it was opened (messages and the portable scheme). */
  abs: string;
  /** Store-relative path of the folder (`''` for the root). */
  rel: string;
}

/** Why opening `what` as a folder failed, as a {@link LocalDirError}. */
async function folderFailure(e: unknown, rel: string, where: string, lstatPath: string): Promise<unknown> {
  const code = errCode(e);
  if (code === 'ENOENT') return new LocalDirError('missing', rel, `${where} does not exist`, { cause: e });
  if (code === 'ENOTDIR' || code === 'ELOOP') {
    const st = await fsp.lstat(lstatPath).catch(() => undefined);
    if (st?.isSymbolicLink()) return new LocalDirError('symlink', rel, `${where} is a symlink; never followed`, { cause: e });
    if (st === undefined) return new LocalDirError('missing', rel, `${where} does not exist`, { cause: e });
    return new LocalDirError('not-directory', rel, `${where} is not a folder`, { cause: e });
  }
  return e;
}

/** {@link folderFailure} with a synchronous `lstat`. */
function folderFailureSync(e: unknown, rel: string, where: string, lstatPath: string): unknown {
  const code = errCode(e);
  if (code === 'ENOENT') return new LocalDirError('missing', rel, `${where} does not exist`, { cause: e });
  if (code === 'ENOTDIR' || code === 'ELOOP') {
    let st: BigIntStats | undefined;
    try {
      st = lstatSync(lstatPath, { bigint: true });
    } catch {
      st = undefined;
    }
    if (st?.isSymbolicLink()) return new LocalDirError('symlink', rel, `${where} is a symlink; never followed`, { cause: e });
    if (st === undefined) return new LocalDirError('missing', rel, `${where} does not exist`, { cause: e });
    return new LocalDirError('not-directory', rel, `${where} is not a folder`, { cause: e });
  }
  return e;
}

/** Close a folder descriptor opened synchronously, ignoring a failure (nothing was written through it). */
function closeFdQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // Already closed.
  }
}

export class PinnedChain {
  readonly #links: Link[];
  readonly #useProc: boolean;

  private constructor(root: Link, useProc: boolean) {
    this.#links = [root];
    this.#useProc = useProc;
  }

  /**
   * Open the store root (never through a symlink) and check it is the folder `expected` names,
   * when given. Throws a {@link LocalDirError}: `missing`, `symlink`, `not-directory`, `replaced`.
   */
  static async openRoot(rootAbs: string, expected: DirIdentity | undefined): Promise<PinnedChain> {
    let fh: fsp.FileHandle;
    try {
      fh = await fsp.open(rootAbs, DIR_FLAGS);
    } catch (e) {
      throw await folderFailure(e, '.', rootAbs, rootAbs);
    }
    try {
      const id = identityOf(await fh.stat({ bigint: true }));
      if (expected !== undefined && !sameIdentity(id, expected)) {
        throw new LocalDirError('replaced', '.', `${rootAbs} is not the folder this store was mounted in any more; left untouched`);
      }
      return new PinnedChain({ fd: fh.fd, fh, id, abs: rootAbs, rel: '' }, procFdAvailable());
    } catch (e) {
      await fh.close().catch(() => {});
      throw e;
    }
  }

  /**
   * {@link openRoot} with synchronous calls (an open and an fstat, microseconds on a local disk),
   * for a writer that pins many folders in a row. The same refusals.
   */
  static openRootSync(rootAbs: string, expected: DirIdentity | undefined): PinnedChain {
    let fd: number;
    try {
      fd = openSync(rootAbs, DIR_FLAGS);
    } catch (e) {
      throw folderFailureSync(e, '.', rootAbs, rootAbs);
    }
    try {
      const id = identityOf(fstatSync(fd, { bigint: true }));
      if (expected !== undefined && !sameIdentity(id, expected)) {
        throw new LocalDirError('replaced', '.', `${rootAbs} is not the folder this store was mounted in any more; left untouched`);
      }
      return new PinnedChain({ fd, fh: undefined, id, abs: rootAbs, rel: '' }, procFdAvailable());
    } catch (e) {
      closeFdQuietly(fd);
      throw e;
    }
  }

  /** False once {@link close}d: nothing is reached through it any more. */
  get isOpen(): boolean {
    return this.#links.length > 0;
  }

  /** Identity of the root folder. */
  get rootIdentity(): DirIdentity {
    return this.#links[0]!.id;
  }

  /** Store-relative path of the pinned folder (`''` for the root). */
  get rel(): string {
    return this.#leaf.rel;
  }

  /** Number of folders below the root in the chain. */
  get depth(): number {
    return this.#links.length - 1;
  }

  get #leaf(): Link {
    return this.#links[this.#links.length - 1]!;
  }

  #relOf(name: string, link: Link = this.#leaf): string {
    return link.rel === '' ? name : `${link.rel}/${name}`;
  }

  #entryIn(link: Link, name: string): string {
    return this.#useProc ? `/proc/self/fd/${link.fd}/${name}` : path.join(link.abs, name);
  }

  /**
   * True when entries are reached through the pinned folder's descriptor, so a folder swapped
   * later cannot redirect them; false when they are reached by path, which is only safe right
   * after {@link verifySync}.
   */
  get throughDescriptor(): boolean {
    return this.#useProc;
  }

  /** The path through which the kernel reaches `name` inside the pinned folder. */
  entry(name: string): string {
    return this.#entryIn(this.#leaf, name);
  }

  /** The same for a name in the root folder. */
  rootEntry(name: string): string {
    return this.#entryIn(this.#links[0]!, name);
  }

  /** A path naming the pinned folder itself (for `readdir`). */
  self(): string {
    const leaf = this.#leaf;
    return this.#useProc ? `/proc/self/fd/${leaf.fd}` : leaf.abs;
  }

  /**
   * Open the folder `name` inside the pinned one and pin it too. With `create`, a missing folder
   * is created first (`beforeCreate` runs right before the `mkdir`, to refuse it). Throws a
   * {@link LocalDirError} when `name` is a symlink, a file, or missing without `create`.
   */
  async descend(name: string, opts: { create?: boolean; beforeCreate?: () => void } = {}): Promise<void> {
    const parent = this.#leaf;
    const rel = this.#relOf(name);
    const entry = this.entry(name);
    const abs = path.join(parent.abs, name);
    let fh: fsp.FileHandle | undefined;
    for (let attempt = 0; fh === undefined; attempt++) {
      try {
        fh = await fsp.open(entry, DIR_FLAGS);
      } catch (e) {
        if (errCode(e) === 'ENOENT' && opts.create && attempt === 0) {
          opts.beforeCreate?.();
          await this.verify();
          await fsp.mkdir(entry, { mode: 0o755 }).catch((err: unknown) => {
            if (errCode(err) !== 'EEXIST') throw err;
          });
          continue;
        }
        throw await folderFailure(e, rel, rel, entry);
      }
    }
    try {
      const id = identityOf(await fh.stat({ bigint: true }));
      this.#links.push({ fd: fh.fd, fh, id, abs, rel });
    } catch (e) {
      await fh.close().catch(() => {});
      throw e;
    }
    // Without fd-relative paths the open resolved the whole absolute path: make sure every folder
    // on it is still the one pinned, the new one included.
    if (!this.#useProc) await this.verify();
  }

  /** {@link descend} with synchronous calls; the same checks in the same order. */
  descendSync(name: string, opts: { create?: boolean; beforeCreate?: () => void } = {}): void {
    const parent = this.#leaf;
    const rel = this.#relOf(name);
    const entry = this.entry(name);
    const abs = path.join(parent.abs, name);
    let fd: number | undefined;
    for (let attempt = 0; fd === undefined; attempt++) {
      try {
        fd = openSync(entry, DIR_FLAGS);
      } catch (e) {
        if (errCode(e) === 'ENOENT' && opts.create && attempt === 0) {
          opts.beforeCreate?.();
          this.verifySync();
          try {
            mkdirSync(entry, { mode: 0o755 });
          } catch (err) {
            if (errCode(err) !== 'EEXIST') throw err;
          }
          continue;
        }
        throw folderFailureSync(e, rel, rel, entry);
      }
    }
    try {
      const id = identityOf(fstatSync(fd, { bigint: true }));
      this.#links.push({ fd, fh: undefined, id, abs, rel });
    } catch (e) {
      closeFdQuietly(fd);
      throw e;
    }
    if (!this.#useProc) this.verifySync();
  }

  /** Close the deepest folder and go back to its parent. */
  async ascend(): Promise<void> {
    if (this.#links.length <= 1) return;
    await closeLink(this.#links.pop()!);
  }

  /**
   * Re-check that every folder of the chain is still where it was opened: the root at its
   * absolute path and each folder under its name in its parent, same device and inode, not a
   * symlink. Throws `replaced` otherwise.
   */
  async verify(): Promise<void> {
    const stats = await Promise.all(this.#links.map((_, i) => fsp.lstat(this.#whereIs(i), { bigint: true }).catch(() => undefined)));
    this.#checkSame(stats);
  }

  /**
   * {@link verify} with synchronous `lstat`s, for a batch of synchronous writes: nothing else runs
   * between this check and the rename that follows it. `rootCheckedAs`: the identity the caller
   * found the root folder at, earlier in the same run of synchronous calls (another chain's check
   * of the same root); when it is this chain's root identity, the root's `lstat` is not repeated.
   */
  verifySync(opts: { rootCheckedAs?: DirIdentity } = {}): void {
    const root = this.#links[0];
    const skipRoot = opts.rootCheckedAs !== undefined && root !== undefined && sameIdentity(opts.rootCheckedAs, root.id);
    this.#checkSame(
      this.#links.map((_, i) => {
        if (i === 0 && skipRoot) return 'checked';
        try {
          return lstatSync(this.#whereIs(i), { bigint: true });
        } catch {
          return undefined;
        }
      }),
    );
  }

  /** Where folder `i` of the chain is looked up: the root at its path, the others in their parent. */
  #whereIs(i: number): string {
    const link = this.#links[i]!;
    return i === 0 ? link.abs : this.#entryIn(this.#links[i - 1]!, path.basename(link.abs));
  }

  /** Throw `replaced` unless every folder's fresh lstat is the folder first opened there. */
  #checkSame(stats: Array<BigIntStats | 'checked' | undefined>): void {
    this.#links.forEach((link, i) => {
      const st = stats[i];
      if (st === 'checked') return;
      if (st === undefined || !st.isDirectory() || !sameIdentity(identityOf(st), link.id)) {
        const what = i === 0 ? link.abs : link.rel;
        throw new LocalDirError('replaced', link.rel || '.', `${what} was moved or replaced while in use; nothing written through it`);
      }
    });
  }

  /** Open file descriptors the chain holds (one per folder). */
  get openFolders(): number {
    return this.#links.length;
  }

  /** Close every folder of the chain. */
  async close(): Promise<void> {
    while (this.#links.length > 0) await closeLink(this.#links.pop()!);
  }

  /**
   * Close every folder of the chain now, when each was opened synchronously ({@link openRootSync},
   * {@link descendSync}); a folder opened through the promise API is closed in the background.
   */
  closeSync(): void {
    while (this.#links.length > 0) void closeLink(this.#links.pop()!);
  }
}

/** Close one folder of a chain: through its handle when it has one, else its descriptor, now. */
async function closeLink(link: Link): Promise<void> {
  if (link.fh !== undefined) await link.fh.close().catch(() => {});
  else closeFdQuietly(link.fd);
}
