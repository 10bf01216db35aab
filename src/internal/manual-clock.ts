import type { CancelTimer, TimerClock } from './clock.js';

interface Pending {
  dueMs: number;
  seq: number;
  callback: () => void;
}

/**
 * A {@link TimerClock} that moves only when told to. `advance(ms)` runs every callback that falls
 * due on the way, earliest first (ties in scheduling order), with the clock reading the callback's
 * due time, and lets the code each callback resumes run before the next one fires.
 */
export class ManualClock implements TimerClock {
  #nowMs: number;
  #seq = 0;
  #pending: Pending[] = [];

  constructor(startMs = 1_000_000) {
    this.#nowMs = startMs;
  }

  now(): number {
    return this.#nowMs;
  }

  schedule(ms: number, callback: () => void): CancelTimer {
    const entry: Pending = { dueMs: this.#nowMs + Math.max(0, ms), seq: this.#seq++, callback };
    this.#pending.push(entry);
    return () => {
      this.#pending = this.#pending.filter((p) => p !== entry);
    };
  }

  /** Callbacks scheduled and not yet run or cancelled. */
  get pendingTimers(): number {
    return this.#pending.length;
  }

  /** Milliseconds until the earliest pending callback, or undefined when none is pending. */
  get nextDueInMs(): number | undefined {
    const next = this.#earliest();
    return next === undefined ? undefined : next.dueMs - this.#nowMs;
  }

  /** Move the clock `ms` forward, running each callback that falls due on the way. */
  async advance(ms: number): Promise<void> {
    const targetMs = this.#nowMs + Math.max(0, ms);
    await settle();
    for (let next = this.#earliest(); next !== undefined && next.dueMs <= targetMs; next = this.#earliest()) {
      this.#pending = this.#pending.filter((p) => p !== next);
      this.#nowMs = next.dueMs;
      next.callback();
      await settle();
    }
    this.#nowMs = targetMs;
    await settle();
  }

  #earliest(): Pending | undefined {
    let best: Pending | undefined;
    for (const p of this.#pending) {
      if (best === undefined || p.dueMs < best.dueMs || (p.dueMs === best.dueMs && p.seq < best.seq)) best = p;
    }
    return best;
  }
}

/** Let pending promise reactions (and the ones they chain) run: one turn of the event loop. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
