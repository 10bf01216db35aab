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
