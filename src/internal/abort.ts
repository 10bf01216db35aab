/**
 * Abort plumbing. Every wait in the library can be cut short by a signal, and every link between
 * a caller's signal and an internal controller is detached once the work it guards is done. Waits
 * run on a {@link TimerClock} (the process's monotonic clock unless a test injects its own).
 */
import { monotonicClock, type TimerClock } from './clock.js';

/** Abort `target` when `source` aborts. Returns the function that undoes the link. */
export function linkAbort(source: AbortSignal | undefined, target: AbortController): () => void {
  return onAbort(source, () => target.abort(source?.reason));
}

/**
 * Call `callback` once when `signal` aborts (at once if it already has); the returned function
 * detaches it. The function form of {@link linkAbort}, for a reaction that is not an abort.
 */
export function onAbort(signal: AbortSignal | undefined, callback: () => void): () => void {
  if (!signal) return () => {};
  if (signal.aborted) {
    callback();
    return () => {};
  }
  signal.addEventListener('abort', callback, { once: true });
  return () => signal.removeEventListener('abort', callback);
}

/** Resolve after `ms` on `clock`, or reject with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal, clock: TimerClock = monotonicClock): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortReason(signal));
      return;
    }
    const onAbort = (): void => {
      cancel();
      reject(abortReason(signal!));
    };
    const cancel = clock.schedule(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Like {@link sleep}, but resolves (with `false`) instead of rejecting when the signal aborts. */
export async function sleepUnlessAborted(ms: number, signal?: AbortSignal, clock: TimerClock = monotonicClock): Promise<boolean> {
  try {
    await sleep(ms, signal, clock);
    return true;
  } catch {
    return false;
  }
}

/** The reason an aborted signal carries, always as an Error. */
export function abortReason(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  if (r instanceof Error) return r;
  // Abort reasons follow the platform's convention (an Error named AbortError or TimeoutError, as
  // AbortSignal.abort() and AbortSignal.timeout() make), which isAbortError and fetch recognise.
  const e = new Error(typeof r === 'string' ? r : 'aborted');
  e.name = 'AbortError';
  return e;
}

/** True when `e` is the rejection of an aborted request or sleep. */
export function isAbortError(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  return e.name === 'AbortError' || e.name === 'APIUserAbortError' || e.name === 'TimeoutError';
}

/**
 * A signal that aborts when any input aborts or after `ms` on `clock` (when given). `dispose()`
 * cancels the timer and detaches from the inputs; call it in `finally`.
 */
export function combineSignals(
  signals: ReadonlyArray<AbortSignal | undefined>,
  ms?: number,
  clock: TimerClock = monotonicClock,
): { signal: AbortSignal; dispose: () => void } {
  const ctrl = new AbortController();
  const detach = signals.map((s) => linkAbort(s, ctrl));
  let cancel: (() => void) | undefined;
  if (ms !== undefined && !ctrl.signal.aborted) {
    cancel = clock.schedule(ms, () => {
      // A platform-style TimeoutError (see abortReason), so waiters treat it as a cut-off, not a failure.
      const e = new Error(`timed out after ${ms} ms`);
      e.name = 'TimeoutError';
      ctrl.abort(e);
    });
  }
  return {
    signal: ctrl.signal,
    dispose: () => {
      cancel?.();
      for (const d of detach) d();
    },
  };
}
