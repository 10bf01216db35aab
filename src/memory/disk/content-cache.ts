import { randomBytes } from 'node:crypto';
import { closeSync, constants as fsc, fsync, futimesSync, openSync, readSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { coerceError, StateFileError } from '../../errors.js';
import { MEMORY_DEFAULTS } from '../../internal/defaults.js';
import { errorSummary, resolveLogger, type Logger } from '../../internal/logger.js';
import { processAlive } from '../../internal/process-alive.js';
import { MAX_MEMORY_BYTES } from './local-dir.js';
import { sha256Hex } from './local-scan.js';
import { ensureStateSubdir, STATE_FILE_FLAGS, syncDir } from './state-dir.js';

/**
 * The content cache: memory contents this worker downloaded (or a sync pulled), kept in the state
 * folder so the next mount of an unchanged store copies them instead of fetching them again.
 *
 * Rules:
 * - it lives in `<stateDir>/content-cache/` (`0700`, like the whole state folder, never inside a
 *   mount), one file per content, named by its `content_sha256` (`<2 hex>/<64 hex>`), holding the
 *   content's bytes and nothing else: no index, no store ids, no paths; what it holds is known by
 *   scanning it once per process;
 * - a content is put only when its bytes hash to the sha it is filed under; every read hashes the
 *   bytes again, and a blob that differs (changed on disk, torn by a power cut) is removed and
 *   reported missing, so the caller fetches the memory: a bad blob is never handed out;
 * - a put writes a temp file (`O_EXCL | O_NOFOLLOW`, `0600`) in the cache's `tmp/` folder, fsyncs
 *   it, renames it to its name, and the folders renamed into are fsynced once the writes in
 *   flight are done: a crash at any point leaves a temp file (removed at the next scan) or a whole
 *   blob, never a half-written one under a sha's name (a rename a power cut undoes is a miss);
 * - puts run in the background, two at a time, held back while a mount downloads and for two
 *   seconds after ({@link holding}), so they slow neither the mount nor the session's first tool
 *   calls; a mount never waits for the cache (an unmount does, for what is left to write). Puts waiting
 *   beyond {@link PENDING_PUT_BYTES} are dropped (the next mount fetches them);
 * - it holds at most `maxBytes` of content: past it, the least recently used blobs (a hit counts
 *   as a use, and is stamped on the blob's mtime, to the minute, so the order survives a restart)
 *   are removed;
 * - any failure of the cache (full disk, unreadable folder) is logged once and costs speed only:
 *   the caller fetches what the cache could not give.
 * Several processes may share one state folder: each keeps its own view of what the cache holds; a
 * blob another process removed is a miss, and the bound holds per process.
 */

/** Default bound of the cache, in bytes (512 MiB). */
export const CONTENT_CACHE_DEFAULT_BYTES = MEMORY_DEFAULTS.contentCacheBytes;
/** The cache's folder under the state folder. */
export const CONTENT_CACHE_FOLDER = 'content-cache';
const TMP_FOLDER = 'tmp';
/**
 * Bytes of puts waiting to be written at most; more are dropped. A mount holds its puts until it is
 * done, so this is what the cache adds to a mount's memory: a store of larger contents is cached a
 * part per session (the parts already cached are not put again).
 */
export const PENDING_PUT_BYTES = 4 * 1024 * 1024;
/** Puts written at once. */
const PUT_WRITERS = 2;
/** How long after a mount the writes it held back start. */
const PUT_DELAY_MS = 2_000;
const SHA256_HEX = /^[0-9a-f]{64}$/u;
/** A blob used again within this long of its last stamped use is not stamped again. */
const USE_STAMP_GRAIN_MS = 60_000;
const READ_FLAGS = fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK;

export interface ContentCacheOptions {
  /** The state folder the cache lives in. */
  stateDir: string;
  /** Most bytes of content kept; the least recently used are removed past it. */
  maxBytes: number;
  logger?: Logger;
}

/** Shared per state folder within a process: every mount and sync of the worker sees the same view. */
const shared = new Map<string, ContentCache>();

export class ContentCache {
  readonly #root: string;
  readonly #stateDir: string;
  #maxBytes: number;
  readonly #log: Logger;
  /**
   * Cached shas, least recently used first: each blob's size, and the use last stamped on its
   * mtime (ms), so a read needs no fstat.
   */
  readonly #index = new Map<string, { size: number; usedAt: number }>();
  #bytes = 0;
  #opened: Promise<boolean> | undefined;
  #usable = false;
  #failed = false;
  #pendingBytes = 0;
  /** Puts not written yet, oldest first; `hashed`: the caller hashed the bytes to their sha already. */
  readonly #waiting = new Map<string, { bytes: Buffer; hashed: boolean }>();
  #writers = 0;
  #holds = 0;
  #resume: NodeJS.Timeout | undefined;
  #flushing = 0;
  #drained: Promise<void> | undefined;
  #onDrained: (() => void) | undefined;
  /** Shard folders known to exist, and those a rename went into since their last fsync. */
  readonly #shards = new Set<string>();
  readonly #unsyncedShards = new Set<string>();
  readonly #tempStem = `${process.pid}-${randomBytes(6).toString('hex')}-`;
  #tempCount = 0;

  constructor(opts: ContentCacheOptions) {
    this.#stateDir = opts.stateDir;
    this.#root = path.join(path.resolve(opts.stateDir), CONTENT_CACHE_FOLDER);
    this.#maxBytes = opts.maxBytes;
    this.#log = resolveLogger(opts.logger).child({ component: 'content-cache' });
  }

  /**
   * The process's cache of `stateDir`, or undefined when `maxBytes` is 0 (the cache is off). A
   * later call with another bound changes the bound of the shared cache.
   */
  static shared(opts: ContentCacheOptions): ContentCache | undefined {
    if (opts.maxBytes <= 0) return undefined;
    const key = path.resolve(opts.stateDir);
    let cache = shared.get(key);
    if (cache === undefined) {
      cache = new ContentCache(opts);
      shared.set(key, cache);
    } else cache.#maxBytes = opts.maxBytes;
    return cache;
  }

  /** The cache's folder. */
  get root(): string {
    return this.#root;
  }

  /** Blobs known to be cached (after {@link open}). */
  get count(): number {
    return this.#index.size;
  }

  /** Bytes of content known to be cached. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Create the folder and learn what it holds (once per process; later calls return the first
   * answer). Resolves false when the cache cannot be used; never rejects.
   */
  open(): Promise<boolean> {
    this.#opened ??= this.#scan().then(
      () => {
        this.#usable = true;
        return true;
      },
      (e: unknown) => {
        this.#fail(e, 'could not open the content cache; mounts download every memory');
        return false;
      },
    );
    return this.#opened;
  }

  /** True when a blob for `sha` is known to be there (it is still verified when read). */
  has(sha: string): boolean {
    return this.#usable && this.#index.has(sha);
  }

  /**
   * The bytes of `sha`, read and hashed now; undefined when there is none or it does not hash to
   * `sha` (that blob is removed, with a warning on `log`). Synchronous: a blob is at most one
   * memory's size. With `scratch` (larger than the blob), the bytes are read into it and the
   * result is a view of it, valid until the caller reuses it; else into a new buffer.
   *
   * An open, one read and a close: the size is the one the blob was filed with (a blob of another
   * size now, grown or cut, is not its content, and up to one byte more than that size is read to
   * see it), so no fstat is needed; a folder or a FIFO there fails the read or comes short.
   */
  read(sha: string, log: Logger = this.#log, scratch?: Buffer): Buffer | undefined {
    const entry = this.#usable ? this.#index.get(sha) : undefined;
    if (entry === undefined) return undefined;
    const want = entry.size;
    if (want > MAX_MEMORY_BYTES) {
      this.#drop(sha, 'larger than a memory', log);
      return undefined;
    }
    const into = scratch !== undefined && scratch.length > want ? scratch : Buffer.allocUnsafe(want + 1);
    let bytes: Buffer;
    try {
      const fd = openSync(this.#blobPath(sha), READ_FLAGS);
      try {
        let off = 0;
        while (off <= want) {
          const n = readSync(fd, into, off, want + 1 - off, off);
          if (n === 0) break;
          off += n;
        }
        if (off !== want) {
          this.#drop(sha, 'not the size it was filed with', log);
          return undefined;
        }
        bytes = into.subarray(0, want);
        if (sha256Hex(bytes) !== sha) {
          this.#drop(sha, 'its bytes do not hash to its name', log);
          return undefined;
        }
        // The use is stamped on the blob, so the least-recently-used order survives a restart; to
        // the minute, which spares a call per file when a store is mounted again soon after.
        const nowMs = Date.now();
        if (entry.usedAt < nowMs - USE_STAMP_GRAIN_MS) {
          futimesSync(fd, nowMs / 1000, nowMs / 1000);
          entry.usedAt = nowMs;
        }
      } finally {
        closeSync(fd);
      }
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      // Removed by another process sharing the folder, or replaced by something not a file.
      this.#forget(sha);
      if (code !== 'ENOENT') log.warn({ sha, error: errorSummary(coerceError(e)) }, 'content cache blob unreadable; the memory is fetched');
      return undefined;
    }
    if (this.#index.get(sha) === entry) {
      this.#index.delete(sha);
      this.#index.set(sha, entry);
    }
    return bytes;
  }

  /**
   * The path of the blob of `sha` when the cache holds it, for a caller that links a copy to it
   * after {@link read} checked its bytes (blobs are only ever renamed into place whole, never
   * written in place, so the file at that path holds those bytes). Whoever links to it must make
   * sure nothing writes through the link: the copy is read-only to everyone but this process.
   */
  blobFile(sha: string): string | undefined {
    return this.#usable && this.#index.has(sha) ? this.#blobPath(sha) : undefined;
  }

  /**
   * Keep `bytes` as the content of `sha`, in the background. Ignored when it is cached already,
   * when it alone is over the bound, or when too many puts wait; dropped when the bytes do not hash
   * to `sha`. `hashed` says the caller hashed these very bytes to `sha` already; else they are
   * hashed when their turn to be written comes (after the mount that put them), not now.
   */
  put(sha: string, bytes: Uint8Array, hashed = false): void {
    if (!this.#usable || this.#index.has(sha) || this.#waiting.has(sha) || !SHA256_HEX.test(sha)) return;
    if (bytes.length > this.#maxBytes || bytes.length > MAX_MEMORY_BYTES) return;
    if (this.#pendingBytes + bytes.length > PENDING_PUT_BYTES) return;
    // A copy: the caller's buffer is reused for its next file.
    this.#waiting.set(sha, { bytes: Buffer.from(bytes), hashed });
    this.#pendingBytes += bytes.length;
    this.#pump();
  }

  /**
   * Hold the writes back while `run` runs (a mount downloading: its own writes come first), then
   * let them go. Puts made meanwhile wait, within {@link PENDING_PUT_BYTES}.
   */
  async holding<T>(run: () => Promise<T>): Promise<T> {
    this.#holds++;
    try {
      return await run();
    } finally {
      this.#holds--;
      if (this.#holds === 0) {
        // The first tool calls of the session come right after its mount: the writes wait a little.
        if (this.#resume !== undefined) clearTimeout(this.#resume);
        this.#resume = setTimeout(() => {
          this.#resume = undefined;
          this.#pump();
        }, PUT_DELAY_MS);
        this.#resume.unref?.();
      }
    }
  }

  /** Resolves once every put made so far is written (or dropped), holds or not. */
  async flush(): Promise<void> {
    this.#flushing++;
    try {
      this.#pump();
      while (this.#drained !== undefined) await this.#drained;
    } finally {
      this.#flushing--;
    }
  }

  /** True while writes wait: a mount downloads, or ended less than {@link PUT_DELAY_MS} ago (unless flushing). */
  get #held(): boolean {
    return (this.#holds > 0 || this.#resume !== undefined) && this.#flushing === 0;
  }

  /** Start the writers, up to {@link PUT_WRITERS}, unless held. */
  #pump(): void {
    if (this.#held) return;
    while (this.#writers < PUT_WRITERS && this.#waiting.size > 0) {
      this.#writers++;
      if (this.#drained === undefined) this.#drained = new Promise((resolve) => (this.#onDrained = resolve));
      void this.#writeAll();
    }
  }

  async #writeAll(): Promise<void> {
    try {
      for (;;) {
        if (this.#held) break;
        const next = this.#waiting.entries().next();
        if (next.done === true) break;
        const [sha, { bytes, hashed }] = next.value;
        this.#waiting.delete(sha);
        try {
          if (!this.#usable || this.#index.has(sha)) continue;
          if (!hashed && sha256Hex(bytes) !== sha) {
            this.#log.warn({ sha }, 'a downloaded content does not hash to its listed content_sha256; it is not cached');
            continue;
          }
          await this.#write(sha, bytes);
        } catch (e) {
          this.#fail(e, 'could not write to the content cache; later mounts fetch what it misses');
        } finally {
          this.#pendingBytes -= bytes.length;
        }
      }
    } finally {
      this.#writers--;
      if (this.#writers === 0) {
        // The renames of this run made durable: each folder they went into fsynced once.
        const shards = [...this.#unsyncedShards];
        this.#unsyncedShards.clear();
        for (const shard of shards) await syncDir(shard).catch(() => {});
        if (this.#writers === 0 && (this.#waiting.size === 0 || this.#held)) {
          const done = this.#onDrained;
          this.#drained = undefined;
          this.#onDrained = undefined;
          done?.();
        }
        this.#pump();
      }
    }
  }

  async #write(sha: string, bytes: Buffer): Promise<void> {
    // Room is made and taken in one synchronous step, so writers side by side never overshoot.
    const victims = this.#makeRoom(bytes.length);
    this.#bytes += bytes.length;
    let stored = false;
    try {
      for (const victim of victims) await fsp.unlink(this.#blobPath(victim)).catch(() => {});
      await this.#store(sha, bytes);
      stored = true;
    } finally {
      if (!stored) this.#bytes -= bytes.length;
    }
  }

  async #store(sha: string, bytes: Buffer): Promise<void> {
    const shard = path.join(this.#root, sha.slice(0, 2));
    if (!this.#shards.has(shard)) {
      await fsp.mkdir(shard, { mode: 0o700 }).catch((e: unknown) => {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      });
      const shardStat = await fsp.lstat(shard);
      if (!shardStat.isDirectory())
        throw new StateFileError(`content cache folder ${shard} is not a folder; remove it (the cache refills itself)`, { path: shard });
      this.#shards.add(shard);
    }
    const tmp = path.join(this.#root, TMP_FOLDER, `${this.#tempStem}${(this.#tempCount++).toString(36)}`);
    // The quick calls synchronous (a local create, write and rename take microseconds; each
    // promise-based call costs the main thread far more), the fsync in the thread pool.
    const fd = openSync(tmp, STATE_FILE_FLAGS, 0o600);
    let open = true;
    let renamed = false;
    try {
      for (let off = 0; off < bytes.length;) off += writeSync(fd, bytes, off, bytes.length - off);
      await new Promise<void>((resolve, reject) => fsync(fd, (e) => (e ? reject(e) : resolve())));
      closeSync(fd);
      open = false;
      renameSync(tmp, this.#blobPath(sha));
      renamed = true;
    } finally {
      if (open) closeQuietly(fd);
      if (!renamed) unlinkQuietly(tmp);
    }
    this.#unsyncedShards.add(shard);
    this.#index.set(sha, { size: bytes.length, usedAt: Date.now() });
  }

  /** Forget least recently used blobs until `incoming` more bytes fit the bound; returns them, to remove. */
  #makeRoom(incoming: number): string[] {
    const victims: string[] = [];
    for (const sha of this.#index.keys()) {
      if (this.#bytes + incoming <= this.#maxBytes) break;
      this.#forget(sha);
      victims.push(sha);
    }
    return victims;
  }

  #blobPath(sha: string): string {
    return path.join(this.#root, sha.slice(0, 2), sha);
  }

  #forget(sha: string): void {
    const entry = this.#index.get(sha);
    if (entry === undefined) return;
    this.#index.delete(sha);
    this.#bytes -= entry.size;
  }

  #drop(sha: string, why: string, log: Logger): void {
    this.#forget(sha);
    log.warn({ sha, reason: why }, 'content cache blob removed: it is not the content it is filed under; the memory is fetched');
    void fsp.unlink(this.#blobPath(sha)).catch(() => {});
  }

  #fail(e: unknown, message: string): void {
    if (!this.#failed) this.#log.warn({ root: this.#root, error: errorSummary(coerceError(e)) }, message);
    this.#failed = true;
  }

  /**
   * Create the folders (each a real `0700` folder, never a symlink), remove temp files no live
   * process is writing, and index the blobs by last use (mtime), oldest first. Anything that is not
   * a blob named by its sha is left alone and never read.
   */
  async #scan(): Promise<void> {
    await ensureStateSubdir(this.#stateDir, [CONTENT_CACHE_FOLDER, TMP_FOLDER]);
    const tmpDir = path.join(this.#root, TMP_FOLDER);
    for (const name of await fsp.readdir(tmpDir)) {
      const pid = Number(name.split('-', 1)[0]);
      if (!Number.isInteger(pid) || pid === process.pid || !processAlive(pid)) await fsp.unlink(path.join(tmpDir, name)).catch(() => {});
    }
    const found: Array<{ sha: string; size: number; usedAt: number }> = [];
    for (const shard of await fsp.readdir(this.#root)) {
      if (!/^[0-9a-f]{2}$/u.test(shard)) continue;
      const dir = path.join(this.#root, shard);
      const st = await fsp.lstat(dir);
      if (!st.isDirectory()) continue;
      for (const name of await fsp.readdir(dir)) {
        if (!SHA256_HEX.test(name) || !name.startsWith(shard)) continue;
        const blob = await fsp.lstat(path.join(dir, name)).catch(() => undefined);
        if (blob === undefined || !blob.isFile()) continue;
        found.push({ sha: name, size: blob.size, usedAt: blob.mtimeMs });
      }
    }
    found.sort((a, b) => a.usedAt - b.usedAt);
    for (const f of found) {
      this.#index.set(f.sha, { size: f.size, usedAt: f.usedAt });
      this.#bytes += f.size;
    }
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // Closed already.
  }
}

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // Gone already; a leftover is removed by the next scan.
  }
}
