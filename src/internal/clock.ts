/**
 * Time sources. Every delay, interval and deadline in the library reads {@link Clock.now}, a
 * monotonic millisecond counter, so a wall-clock jump (NTP step, manual change) changes nothing.
 * The worker also schedules its waits (poll backoff, heartbeat interval, lease deadline, request
 * cut-offs) on a {@link TimerClock}, so a test that injects one drives all of them by hand.
 */
export interface Clock {
  /** Monotonic milliseconds from an arbitrary origin. Never goes backwards. */
  now(): number;
}

/** Cancels a scheduled callback; calling it after the callback ran, or twice, does nothing. */
export type CancelTimer = () => void;

/** A clock that also runs callbacks once some of its milliseconds have passed. */
export interface TimerClock extends Clock {
  /** Run `callback` once `ms` (negative counts as 0) have passed on this clock. */
  schedule(ms: number, callback: () => void): CancelTimer;
}

export const monotonicClock: TimerClock = {
  now: () => Number(process.hrtime.bigint() / 1_000_000n),
  schedule: (ms, callback) => {
    const timer = setTimeout(callback, Math.max(0, ms));
    return () => clearTimeout(timer);
  },
};

/** True when `v` has the shape of a {@link TimerClock}, for option validation. */
export function isTimerClock(v: unknown): v is TimerClock {
  if (typeof v !== 'object' || v === null) return false;
  const c = v as Record<string, unknown>;
  return typeof c['now'] === 'function' && typeof c['schedule'] === 'function';
}
