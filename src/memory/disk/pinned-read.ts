import { closeSync, constants as fsc, fstatSync, openSync, readSync, type BigIntStats } from 'node:fs';
import { LocalDirError, errCode } from './local-dir-error.js';
import type { PinnedChain } from './pinned-dir.js';

/**
 * Reads one regular file inside a folder already pinned, with synchronous calls: open (never
 * following a symlink, never blocking on a FIFO), re-check of the pinned chain, fstat, one read
 * for a file that does not grow meanwhile, close. On a local disk each call takes microseconds,
 * where a round trip through the thread pool costs far more; callers read a bounded batch and
 * then yield to the event loop.
 *
 * - the file is opened through the pinned folder (`/proc/self/fd/<fd>/<name>` on Linux), then the
 *   whole chain is re-checked, so a file reached through a folder moved out of the mount (or
 *   swapped for a symlink) is refused, never read;
 * - anything but a regular file is refused after the `fstat`, before a byte is read;
 * - a file over `maxBytes` is refused from its size, and a file that grows past it while being
 *   read is refused after at most `maxBytes + 1` bytes.
 */

const READ_FLAGS = fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK;

export function readPinnedSync(chain: PinnedChain, name: string, rel: string, maxBytes: number): { bytes: Buffer; stat: BigIntStats } {
  let fd: number;
  try {
    fd = openSync(chain.entry(name), READ_FLAGS);
  } catch (e) {
    throw openFailure(e, rel);
  }
  try {
    chain.verifySync();
    const stat = fstatSync(fd, { bigint: true });
    if (!stat.isFile()) throw new LocalDirError('not-regular', rel, `${rel} is not a regular file; not opened for reading`);
    if (stat.size > BigInt(maxBytes)) {
      throw new LocalDirError('too-large', rel, `${rel} holds ${stat.size} bytes, over the ${maxBytes}-byte limit`);
    }
    // One byte more than the size asks for: a short read is the end of the file. A file that grew
    // since the fstat is read on, never past one byte over the limit.
    const size = Number(stat.size);
    let buf = Buffer.allocUnsafe(size + 1);
    let total = readSync(fd, buf, 0, buf.length, null);
    if (total <= size) return { bytes: buf.subarray(0, total), stat };
    for (;;) {
      if (total > maxBytes) throw new LocalDirError('too-large', rel, `${rel} grew past the ${maxBytes}-byte limit while being read`);
      if (total === buf.length) {
        const bigger = Buffer.allocUnsafe(Math.min(buf.length * 2, maxBytes + 1));
        buf.copy(bigger, 0, 0, total);
        buf = bigger;
      }
      const n = readSync(fd, buf, total, buf.length - total, null);
      if (n === 0) return { bytes: buf.subarray(0, total), stat };
      total += n;
    }
  } finally {
    closeSync(fd);
  }
}

/** The error an open for reading failed with, as a {@link LocalDirError} where it has a meaning. */
export function openFailure(e: unknown, rel: string): unknown {
  const code = errCode(e);
  if (code === 'ELOOP' || code === 'EMLINK') return new LocalDirError('symlink', rel, `${rel} is a symlink; never followed`, { cause: e });
  if (code === 'ENOENT') return new LocalDirError('missing', rel, `${rel} does not exist`, { cause: e });
  if (code === 'ENXIO' || code === 'EISDIR') {
    return new LocalDirError('not-regular', rel, `${rel} is not a regular file; not opened for reading`, { cause: e });
  }
  return e;
}
