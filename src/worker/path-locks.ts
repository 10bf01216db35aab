import path from 'node:path';
import { MemoryMountError } from '../errors.js';
import { abortReason } from '../internal/abort.js';
import { monotonicClock, type TimerClock } from '../internal/clock.js';
import { storeRoot, type StoreRootInput } from '../memory/mount/store-root.js';

/** The mount paths a session's stores take: the same folders the mounter creates. */
export function mountPathsOf(resources: readonly StoreRootInput[], workdir: string): string[] {
  return resources.map((r) => storeRoot(r, workdir));
}

/** Who holds a path: enough to name them in an error. */
export interface PathHolder {
  sessionId: string;
  workId: string;
}

interface Waiter {
  paths: string[];
  holder: PathHolder;
  resolve: (release: () => void) => void;
}

/**
 * Per-mount-path exclusion inside one process: two sessions never hold the same path, nor
 * one path inside another (`/mnt/memory/a` and `/mnt/memory/a/b`). A session takes all its paths at
 * once (no partial holds, so no deadlock between sessions wanting overlapping sets); when any is
 * held it waits, first come first served among waiters whose paths free up, up to a bound.
 */
export class PathLocks {
  readonly #held = new Map<string, PathHolder>();
  readonly #waiters: Waiter[] = [];
  readonly #clock: TimerClock;

  /** `clock` times the waits. Default: the process's monotonic clock. */
  constructor(clock: TimerClock = monotonicClock) {
    this.#clock = clock;
  }

  /** Paths currently held, with their holders (for diagnostics). */
  snapshot(): Array<{ path: string } & PathHolder> {
    return [...this.#held].map(([p, h]) => ({ path: p, ...h }));
  }

  /**
   * Take every path in `paths`, waiting up to `waitMs` while another session holds one of them.
   * Resolves with the function that releases them (idempotent). Rejects with a
   * {@link MemoryMountError} naming the path and the session holding it when the wait runs out,
   * or with the signal's reason when it aborts.
   */
  acquire(paths: readonly string[], holder: PathHolder, opts: { waitMs: number; signal?: AbortSignal }): Promise<() => void> {
    const normalized = [...new Set(paths.map((p) => path.resolve(p)))];
    if (normalized.length === 0) return Promise.resolve(() => {});
    if (opts.signal?.aborted) return Promise.reject(abortReason(opts.signal));
    if (this.#conflict(normalized) === undefined && this.#waiters.length === 0) {
      return Promise.resolve(this.#take(normalized, holder));
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { paths: normalized, holder, resolve: () => {} };
      const cleanup = (): void => {
        cancelTimer();
        opts.signal?.removeEventListener('abort', onAbort);
        const i = this.#waiters.indexOf(waiter);
        if (i >= 0) this.#waiters.splice(i, 1);
      };
      const onAbort = (): void => {
        cleanup();
        reject(abortReason(opts.signal!));
        this.#wake();
      };
      const cancelTimer = this.#clock.schedule(opts.waitMs, () => {
        const busy = this.#conflict(normalized);
        cleanup();
        reject(busyError(busy?.path ?? normalized[0]!, holder, busy?.holder, opts.waitMs));
        this.#wake();
      });
      waiter.resolve = (release) => {
        cleanup();
        resolve(release);
      };
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(waiter);
      this.#wake();
    });
  }

  #take(paths: string[], holder: PathHolder): () => void {
    for (const p of paths) this.#held.set(p, holder);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const p of paths) if (this.#held.get(p) === holder) this.#held.delete(p);
      this.#wake();
    };
  }

  /** Grant waiters in arrival order while their paths are free; a waiter never overtakes an earlier one it overlaps. */
  #wake(): void {
    const blocked: string[] = [];
    for (const w of [...this.#waiters]) {
      const overlapsEarlier = w.paths.some((p) => blocked.some((b) => overlaps(p, b)));
      if (!overlapsEarlier && this.#conflict(w.paths) === undefined) {
        w.resolve(this.#take(w.paths, w.holder));
      } else {
        blocked.push(...w.paths);
      }
    }
  }

  #conflict(paths: string[]): { path: string; holder: PathHolder } | undefined {
    for (const p of paths) {
      for (const [heldPath, holder] of this.#held) {
        if (overlaps(p, heldPath)) return { path: heldPath, holder };
      }
    }
    return undefined;
  }
}

/** True when one path equals or contains the other. */
export function overlaps(a: string, b: string): boolean {
  if (a === b) return true;
  const withSep = (p: string): string => (p.endsWith(path.sep) ? p : p + path.sep);
  return a.startsWith(withSep(b)) || b.startsWith(withSep(a));
}

function busyError(p: string, waiting: PathHolder, holder: PathHolder | undefined, waitMs: number): MemoryMountError {
  const who = holder ? `session ${holder.sessionId} (work item ${holder.workId})` : 'another session of this worker';
  return new MemoryMountError(
    `mount path ${p} is in use by ${who}; session ${waiting.sessionId} (work item ${waiting.workId}) waited ` +
      `${waitMs} ms for it and gave up. Two sessions whose tools run in the worker process cannot mount the same ` +
      'store path at once on one host: run the sessions sandboxed (each then holds its own copy), give the stores ' +
      'distinct mount_path values, or raise pathWaitMs.',
    { path: p },
  );
}
