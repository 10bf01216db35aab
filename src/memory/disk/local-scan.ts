import { isUtf8 } from 'node:buffer';
import * as crypto from 'node:crypto';
import { LocalDir, LocalDirError, MAX_MEMORY_BYTES } from './local-dir.js';
import { checkRelPath } from '../rules/paths.js';
import type { LocalEntry } from '../rules/plan.js';
import { fileStatOf, type FileStat } from '../rules/file-stat.js';
import type { LocalScan, SkippedEntry } from '../rules/scan.js';
import type { StatCache } from './stat-cache.js';

/**
 * Scans a store folder into the {@link LocalScan} a sync plans from. Unchanged files are answered
 * by the stat cache and not read; files over the server's size limit are `unsyncable` from their
 * size alone and never read; files that are not UTF-8 text are `unsyncable` too.
 */

/** Most bytes one scan keeps for the uploads that follow it. */
export const KEPT_BYTES_BUDGET = 16 * 1024 * 1024;

export interface ScanOptions {
  /** Paths deliberately not synced (case-collision losers…): left out of the scan. */
  exclude?: ReadonlySet<string>;
  maxBytes?: number;
  /** Most bytes of read files kept in `contents`. Default {@link KEPT_BYTES_BUDGET}. */
  keptBytesBudget?: number;
  /**
   * Called for each regular text file as soon as its entry is known (from the cache, or once read
   * with the bytes when the scan keeps them), while the scan goes on.
   */
  onFile?: (rel: string, entry: LocalEntry, bytes: Buffer | undefined) => void;
}

/** One-shot hashing (Node 20.12 and later): about half the cost of a Hash object per small file. */
const oneShotHash = (crypto as { hash?: typeof crypto.hash }).hash;

export function sha256Hex(bytes: Uint8Array): string {
  return oneShotHash !== undefined ? oneShotHash('sha256', bytes, 'hex') : crypto.createHash('sha256').update(bytes).digest('hex');
}

/** Cheap identity of a file version that was not read: size, mtime and inode. */
export function statFingerprint(st: FileStat): string {
  return `${st.size}:${st.mtimeNs}:${st.ino}`;
}

export async function scanLocal(dir: LocalDir, cache: StatCache, opts: ScanOptions = {}): Promise<LocalScan> {
  const maxBytes = opts.maxBytes ?? MAX_MEMORY_BYTES;
  const entries = new Map<string, LocalEntry>();
  const stats = new Map<string, FileStat>();
  const readSkipped: SkippedEntry[] = [];
  let filesRead = 0;
  const contents = new Map<string, Buffer>();
  let keptBytes = 0;
  const keptBytesBudget = opts.keptBytesBudget ?? KEPT_BYTES_BUDGET;
  // Each file is decided while the walk has its folder pinned: answered by the stat cache, or read
  // there and then, so the folder is pinned once per scan and a read costs a handful of calls.
  // Only the fields compared are kept per file: the lstat itself is dropped as soon as the file is
  // decided, so a scan of thousands of files leaves little to collect.
  const raw = await dir.scan((rel, lstat, read) => {
    if (opts.exclude?.has(rel)) return;
    const st = fileStatOf(lstat);
    stats.set(rel, st);
    const pathCheck = checkRelPath(rel);
    if (!pathCheck.ok) {
      entries.set(rel, { kind: 'unsyncable', reason: pathCheck.reason, fingerprint: statFingerprint(st) });
      return;
    }
    if (st.size > BigInt(maxBytes)) {
      entries.set(rel, {
        kind: 'unsyncable',
        reason: `${st.size} bytes, over the store's ${maxBytes}-byte limit per memory`,
        fingerprint: statFingerprint(st),
      });
      return;
    }
    const hit = cache.lookup(rel, st);
    if (hit) {
      const entry = toEntry(hit.sha, hit.utf8, Number(st.size));
      entries.set(rel, entry);
      if (entry.kind === 'file') opts.onFile?.(rel, entry, undefined);
      return;
    }
    const hashedAtNs = cache.nowNs();
    let bytes: Buffer;
    let stat: FileStat;
    try {
      const got = read(maxBytes);
      bytes = got.bytes;
      stat = fileStatOf(got.stat);
    } catch (e) {
      if (e instanceof LocalDirError && e.failure === 'too-large') {
        entries.set(rel, { kind: 'unsyncable', reason: e.message, fingerprint: statFingerprint(st) });
        return;
      }
      // Vanished, swapped for a symlink/FIFO since the lstat, moved out of the mount, or unreadable:
      // skipped this time, never taken for a deletion.
      stats.delete(rel);
      cache.delete(rel);
      readSkipped.push(skippedFor(rel, e));
      return;
    }
    filesRead++;
    const sha = sha256Hex(bytes);
    const utf8 = isUtf8(bytes);
    cache.record(rel, stat, sha, utf8, hashedAtNs);
    stats.set(rel, stat);
    const entry = toEntry(sha, utf8, bytes.length);
    entries.set(rel, entry);
    if (utf8 && keptBytes + bytes.length <= keptBytesBudget) {
      keptBytes += bytes.length;
      contents.set(rel, bytes);
    }
    if (entry.kind === 'file') opts.onFile?.(rel, entry, contents.get(rel));
  });
  cache.retain(stats);
  const skipped = [...raw.skipped, ...readSkipped];
  return { entries, stats, skipped, reserved: raw.reserved, markerPresent: raw.markerPresent, filesRead, contents };
}

function skippedFor(rel: string, e: unknown): SkippedEntry {
  if (e instanceof LocalDirError) {
    if (e.failure === 'symlink') return { rel, kind: 'symlink' };
    return { rel, kind: 'vanished', code: e.failure };
  }
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  return { rel, kind: code === 'ENAMETOOLONG' ? 'too-long' : 'unreadable', code };
}

function toEntry(sha: string, utf8: boolean, size: number): LocalEntry {
  if (!utf8) return { kind: 'unsyncable', reason: 'not UTF-8 text; the store holds text only', fingerprint: sha };
  return { kind: 'file', sha, size };
}
