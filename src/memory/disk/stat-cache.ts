import { sameFileStat, type FileStat } from '../rules/file-stat.js';

/**
 * Remembers the sha of each file under the stat that file had when it was hashed, so a sync that
 * finds nothing changed reads no file content.
 *
 * Key: (inode, size, mtime ns, ctime ns). A hit is trusted only when the file's mtime is safely
 * older than the moment the hash was taken: git's racy-timestamp guard. A file modified in the
 * same timestamp tick as the hash could keep an identical stat, so such an entry is re-hashed.
 * The guard compares filesystem timestamps, which are wall-clock, so the recording moment is
 * wall-clock too (a clock jump only causes extra re-hashing, never a missed change: any write after
 * the hash carries an mtime at or after the jump's "now").
 *
 * Files the sync writes itself are backdated (see LocalDir.writeFileAtomic) so their entries are
 * trusted at once: any later write by someone else moves the mtime to "now", off the backdated value.
 */
export interface StatCacheEntry {
  ino: bigint;
  size: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
  sha: string;
  /** Whether the bytes are valid UTF-8 (the server only accepts text). */
  utf8: boolean;
  /** Wall-clock ns taken before the bytes were read (or after our own write completed). */
  hashedAtNs: bigint;
}

export interface StatCacheOptions {
  /**
   * How much older than the hash moment an mtime must be to be trusted, when the mtime has no
   * digit below the millisecond. Default 1 s, which covers filesystems with one- or two-second
   * timestamps (FAT counts in 2 s, exFAT in 10 ms).
   */
  racySlackNs?: bigint;
  /**
   * The same, for an mtime with digits below the millisecond: such a filesystem stamps files from
   * the kernel's clock tick (at most 10 ms at HZ=100), so a write in the hash's tick carries an
   * mtime at most one tick before the hash moment. Default 100 ms, ten ticks of margin.
   */
  fineRacySlackNs?: bigint;
  /** Wall-clock now in ns (tests inject it). */
  nowNs?: () => bigint;
}

const DEFAULT_SLACK_NS = 1_000_000_000n;
const DEFAULT_FINE_SLACK_NS = 100_000_000n;
const NS_PER_MS = 1_000_000n;

/**
 * Wall-clock now in ns, at millisecond resolution. Calls within one millisecond get the same
 * BigInt, so the entries recorded in one batch of writes share it instead of holding one each.
 */
function wallClockNs(): () => bigint {
  let ms = Number.NaN;
  let ns = 0n;
  return () => {
    const now = Date.now();
    if (now !== ms) {
      ms = now;
      ns = BigInt(now) * NS_PER_MS;
    }
    return ns;
  };
}

export class StatCache {
  readonly #entries = new Map<string, StatCacheEntry>();
  readonly #slackNs: bigint;
  readonly #fineSlackNs: bigint;
  readonly #nowNs: () => bigint;
  #hits = 0;
  #misses = 0;

  constructor(opts: StatCacheOptions = {}) {
    this.#slackNs = opts.racySlackNs ?? DEFAULT_SLACK_NS;
    this.#fineSlackNs = opts.fineRacySlackNs ?? DEFAULT_FINE_SLACK_NS;
    this.#nowNs = opts.nowNs ?? wallClockNs();
  }

  /** Wall-clock now in ns; take it before reading a file and pass it to {@link record}. */
  nowNs(): bigint {
    return this.#nowNs();
  }

  /** The cached entry for `rel` when its stat still matches and it is not racy; else undefined. */
  lookup(rel: string, st: FileStat): StatCacheEntry | undefined {
    const e = this.#entries.get(rel);
    if (!e || !sameFileStat(e, st)) {
      this.#misses++;
      return undefined;
    }
    // An mtime with sub-millisecond digits comes from a filesystem with fine timestamps (a whole
    // millisecond by chance only costs a re-read).
    const slack = st.mtimeNs % NS_PER_MS !== 0n ? this.#fineSlackNs : this.#slackNs;
    if (st.mtimeNs >= e.hashedAtNs - slack) {
      this.#misses++;
      return undefined;
    }
    this.#hits++;
    return e;
  }

  record(rel: string, st: FileStat, sha: string, utf8: boolean, hashedAtNs: bigint): void {
    this.#entries.set(rel, { ino: st.ino, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs, sha, utf8, hashedAtNs });
  }

  delete(rel: string): void {
    this.#entries.delete(rel);
  }

  /** Drop entries whose path is not in `keep`. */
  retain(keep: ReadonlySet<string> | ReadonlyMap<string, unknown>): void {
    for (const rel of this.#entries.keys()) if (!keep.has(rel)) this.#entries.delete(rel);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Lookups answered from the cache / needing a read, since creation. */
  stats(): { hits: number; misses: number } {
    return { hits: this.#hits, misses: this.#misses };
  }
}

/** A pulled file's mtime: the memory's update time, at least 2 s in the past (see {@link StatCache}). */
export function backdatedMtimeMs(updatedAt: string | undefined): number {
  const latest = Date.now() - 2_000;
  const t = updatedAt === undefined ? Number.NaN : Date.parse(updatedAt);
  return Number.isFinite(t) ? Math.min(t, latest) : latest;
}
