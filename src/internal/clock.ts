/**
 * Time sources. Every delay, interval and deadline in the library reads {@link Clock.now}, a
 * monotonic millisecond counter, so a wall-clock jump (NTP step, manual change) changes nothing.
 * Tests inject a clock they drive themselves.
 */
export interface Clock {
  /** Monotonic milliseconds from an arbitrary origin. Never goes backwards. */
  now(): number;
}

export const monotonicClock: Clock = {
  now: () => Number(process.hrtime.bigint() / 1_000_000n),
};
