import { asWrittenStat, sameFileStat, type FileStat } from '../rules/file-stat.js';

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
 *
 * Files a mount downloads are not stat'ed one by one (one call and one stat object less per file
 * on the mount's path): {@link StatCache.expect} notes what was written (size, the backdated mtime,
 * the sha), and once a batch of writes is done {@link StatCache.settleWritten} gives the batch its
 * bound: the ctime of the batch's last file, read from the filesystem, so the bound is on the
 * filesystem's own clock (a network filesystem's server may run behind the host). The first lookup
 * of such a file takes the stat the scan found for it as its entry when the size is the one
 * written, the mtime is within a millisecond of the one set, and the ctime is no later than the
 * bound. Any later change of the file (a write, `touch`, `chmod`, a rename or link over it) sets
 * its ctime to the filesystem's clock at that moment, past the bound, so it is read. The kernel
 * stamps ctime from its clock tick, so a change made in the tick of the batch's last write could
 * still pass: a mount's folder has no other writer while it downloads (the session starts after
 * the mount). A file whose batch got no bound is read; so are all of them once the wall clock was
 * stepped back since the writes (seen against the monotonic clock).
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
  /** Wall clock minus monotonic clock, in ms: it moves only when the wall clock is stepped (tests inject it). */
  clockOffsetMs?: () => number;
}

/** What a mount wrote to a file it did not stat: checked against the file's first lookup. */
interface WrittenFile {
  size: number;
  /** The mtime the write set, in ms. */
  mtimeMs: number;
  sha: string;
  utf8: boolean;
  /** The ctime of its batch's last file (the file's own is no later); undefined until settled, or when unknown. */
  boundNs: bigint | undefined;
}

const DEFAULT_SLACK_NS = 1_000_000_000n;
const DEFAULT_FINE_SLACK_NS = 100_000_000n;
const NS_PER_MS = 1_000_000n;
/** How far back the wall clock may seem to move against the monotonic one without being stepped (rounding). */
const CLOCK_STEP_MS = 5;

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

function wallMinusMonotonicMs(): number {
  return Date.now() - performance.now();
}

export class StatCache {
  readonly #entries = new Map<string, StatCacheEntry>();
  /** Files written by a mount and not stat'ed yet (see {@link expect}). */
  readonly #written = new Map<string, WrittenFile>();
  /** Those noted since the last {@link settleWritten}. */
  #unsettled: WrittenFile[] = [];
  readonly #slackNs: bigint;
  readonly #fineSlackNs: bigint;
  readonly #nowNs: () => bigint;
  readonly #clockOffsetMs: () => number;
  /** The smallest clock offset seen by {@link expect}; a later one below it means a step back. */
  #writtenOffsetMs = Number.POSITIVE_INFINITY;
  #hits = 0;
  #misses = 0;

  constructor(opts: StatCacheOptions = {}) {
    this.#slackNs = opts.racySlackNs ?? DEFAULT_SLACK_NS;
    this.#fineSlackNs = opts.fineRacySlackNs ?? DEFAULT_FINE_SLACK_NS;
    this.#nowNs = opts.nowNs ?? wallClockNs();
    this.#clockOffsetMs = opts.clockOffsetMs ?? wallMinusMonotonicMs;
  }

  /** Wall-clock now in ns; take it before reading a file and pass it to {@link record}. */
  nowNs(): bigint {
    return this.#nowNs();
  }

  /** The cached entry for `rel` when its stat still matches and it is not racy; else undefined. */
  lookup(rel: string, st: FileStat): StatCacheEntry | undefined {
    const e = this.#entries.get(rel) ?? this.#firstStat(rel, st);
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
    this.#written.delete(rel);
    this.#entries.set(rel, { ino: st.ino, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs, sha, utf8, hashedAtNs });
  }

  /**
   * Note a file just written whole (`size` bytes of content `sha`, its mtime set to `mtimeMs`)
   * without its stat: the first lookup of `rel` checks the stat found then against it, once
   * {@link settleWritten} gave it a bound (see the header). Call it after the write returned.
   */
  expect(rel: string, size: number, mtimeMs: number, sha: string, utf8: boolean): void {
    this.#writtenOffsetMs = Math.min(this.#writtenOffsetMs, this.#clockOffsetMs());
    this.#entries.delete(rel);
    const written: WrittenFile = { size, mtimeMs, sha, utf8, boundNs: undefined };
    this.#written.set(rel, written);
    this.#unsettled.push(written);
  }

  /**
   * Give the files noted since the last call their bound: the ctime of the last of them, read from
   * the filesystem after they were all written; undefined when it could not be read (they are read
   * at their first lookup).
   */
  settleWritten(boundNs: bigint | undefined): void {
    for (const w of this.#unsettled) w.boundNs = boundNs;
    this.#unsettled = [];
  }

  /** The entry a file written by {@link expect} gets from its first stat, when that stat is the write's. */
  #firstStat(rel: string, st: FileStat): StatCacheEntry | undefined {
    const w = this.#written.get(rel);
    if (w === undefined) return undefined;
    this.#written.delete(rel);
    const bound = w.boundNs;
    if (bound === undefined || this.#clockOffsetMs() < this.#writtenOffsetMs - CLOCK_STEP_MS) return undefined;
    if (!asWrittenStat(st, w.size, w.mtimeMs) || st.ctimeNs > bound) return undefined;
    // Hashed, in effect, when its batch ended: the backdated mtime is well before that.
    const entry: StatCacheEntry = {
      ino: st.ino,
      size: st.size,
      mtimeNs: st.mtimeNs,
      ctimeNs: st.ctimeNs,
      sha: w.sha,
      utf8: w.utf8,
      hashedAtNs: bound,
    };
    this.#entries.set(rel, entry);
    return entry;
  }

  delete(rel: string): void {
    this.#entries.delete(rel);
    this.#written.delete(rel);
  }

  /** Drop entries whose path is not in `keep`. */
  retain(keep: ReadonlySet<string> | ReadonlyMap<string, unknown>): void {
    for (const rel of this.#entries.keys()) if (!keep.has(rel)) this.#entries.delete(rel);
    for (const rel of this.#written.keys()) if (!keep.has(rel)) this.#written.delete(rel);
  }

  get size(): number {
    return this.#entries.size + this.#written.size;
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
