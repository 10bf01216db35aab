/**
 * Exponential backoff with jitter: attempt n waits `baseMs * 2^n`, capped at `maxMs`, minus up to
 * `jitter` of itself so that many workers restarting together spread out.
 */
export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
  /** Fraction (0..1) of the delay that may be taken off at random. */
  jitter: number;
}

export function backoffDelayMs(attempt: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const exp = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, Math.min(attempt, 30)));
  return Math.round(exp * (1 - policy.jitter * random()));
}
