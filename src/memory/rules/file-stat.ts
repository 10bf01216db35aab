/**
 * The identity of one file version, as the sync compares it: inode, size, and mtime and ctime in
 * nanoseconds (a `BigIntStats` is one). A scan keeps this much per file, never the whole lstat:
 * a `BigIntStats` carries some twenty BigInts, a `FileStat` taken with {@link fileStatOf} four.
 */
export interface FileStat {
  readonly ino: bigint;
  readonly size: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
}

/** The fields of `st` the sync compares, in an object of their own (`st` itself can be dropped). */
export function fileStatOf(st: FileStat): FileStat {
  return { ino: st.ino, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs };
}

/** True when `b` names the same file version as `a` (see {@link FileStat}). */
export function sameFileStat(a: FileStat, b: FileStat | undefined): boolean {
  return b !== undefined && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
}

/**
 * True when `st` has the size and mtime of a write of `size` bytes whose mtime was set to
 * `mtimeMs`: the mtime within a millisecond of it (the kernel gets the time as seconds in a
 * floating-point number and may round it by a few ns).
 */
export function asWrittenStat(st: Pick<FileStat, 'size' | 'mtimeNs'>, size: number, mtimeMs: number): boolean {
  const offNs = st.mtimeNs - BigInt(mtimeMs) * 1_000_000n;
  return st.size === BigInt(size) && offNs > -1_000_000n && offNs < 1_000_000n;
}
