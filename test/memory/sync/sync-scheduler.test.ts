// Pins when syncs run, on a driven clock and fake timers with a stand-in pass (no store, no
// folder): a due sync runs before a tool call, the end of a call starts one at once when due or
// arms one trailing sync otherwise, the trailing sync never lands inside a tool call, at most one
// sync runs at a time, and nothing starts once the loop is closed. When the session goes idle, a
// push-only pass starts at once (after the running sync), bounded by the flush bound, without
// moving the interval or dropping the trailing sync.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { emptyReport } from '../../../src/memory/rules/sync-report.js';
import type { SyncPhase } from '../../../src/memory/rules/plan.js';
import { SyncScheduler } from '../../../src/memory/sync/sync-scheduler.js';
import type { SyncReport } from '../../../src/memory/rules/types.js';
import { captureLogger, manualClock } from '../int-helpers.js';

const INTERVAL_MS = 15_000;
const PUSH_BOUND_MS = 30_000;

interface Rig {
  scheduler: SyncScheduler;
  clock: ReturnType<typeof manualClock>;
  /** Phases of the passes started, in order. */
  started: SyncPhase[];
  /** Passes running now. */
  inFlight: () => number;
  /** Most passes that ran at once. */
  peak: () => number;
  /** Let the running passes end. */
  release: () => void;
  closed: { value: boolean };
}

function rig(opts: { hold?: boolean; onSignal?: (signal: AbortSignal) => void } = {}): Rig {
  const clock = manualClock();
  const started: SyncPhase[] = [];
  const closed = { value: false };
  let running = 0;
  let peak = 0;
  let waiting: Array<() => void> = [];
  const scheduler = new SyncScheduler({
    clock,
    intervalMs: INTERVAL_MS,
    log: captureLogger().logger,
    closed: () => closed.value,
    pushBoundMs: PUSH_BOUND_MS,
    run: async (phase, signal): Promise<SyncReport> => {
      opts.onSignal?.(signal);
      started.push(phase);
      running++;
      peak = Math.max(peak, running);
      if (opts.hold) await new Promise<void>((resolve) => waiting.push(resolve));
      running--;
      return emptyReport();
    },
  });
  return {
    scheduler,
    clock,
    started,
    inFlight: () => running,
    peak: () => peak,
    release: () => {
      for (const w of waiting) w();
      waiting = [];
    },
    closed,
  };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('before a tool call', () => {
  it('runs nothing while the interval has not passed since the download', async () => {
    const r = rig();
    await r.scheduler.beforeToolCall();
    expect(r.started).toEqual([]);
  });

  it('runs the due sync first, and the tool call waits for it', async () => {
    const r = rig();
    r.clock.advance(INTERVAL_MS);
    await r.scheduler.beforeToolCall();
    expect(r.started).toEqual(['sync']);
  });
});

describe('after a tool call', () => {
  it('starts a due sync at once', async () => {
    const r = rig();
    r.clock.advance(INTERVAL_MS);
    r.scheduler.afterToolCall();
    await vi.advanceTimersByTimeAsync(0);
    expect(r.started).toEqual(['sync']);
  });

  it('arms one trailing sync for when the interval has passed, however many calls end before', async () => {
    const r = rig();
    for (let i = 0; i < 5; i++) {
      await r.scheduler.beforeToolCall();
      r.scheduler.afterToolCall();
    }
    r.clock.advance(INTERVAL_MS);
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(r.started).toEqual(['sync']);
  });

  it('never starts the trailing sync inside a tool call; the end of that call starts it', async () => {
    const r = rig();
    await r.scheduler.beforeToolCall();
    r.scheduler.afterToolCall();
    await r.scheduler.beforeToolCall(); // a long tool call starts before the timer fires
    r.clock.advance(INTERVAL_MS);
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(r.started).toEqual([]);
    r.scheduler.afterToolCall();
    await vi.advanceTimersByTimeAsync(0);
    expect(r.started).toEqual(['sync']);
  });
});

describe('syncNow', () => {
  it('waits for the running sync, then runs its own: never two at once', async () => {
    const r = rig({ hold: true });
    const first = r.scheduler.syncNow();
    const second = r.scheduler.syncNow();
    await vi.advanceTimersByTimeAsync(0);
    expect(r.inFlight()).toBe(1);
    r.release();
    await first;
    await vi.advanceTimersByTimeAsync(0);
    r.release();
    await second;
    expect(r.started).toEqual(['sync', 'sync']);
    expect(r.peak()).toBe(1);
  });

  it('rejects with the reason when its signal aborts', async () => {
    const r = rig();
    const ctrl = new AbortController();
    ctrl.abort(new Error('caller gave up'));
    await expect(r.scheduler.syncNow(ctrl.signal)).rejects.toThrow('caller gave up');
  });

  it('touches nothing once closed and resolves with an empty report', async () => {
    const r = rig();
    r.closed.value = true;
    expect(await r.scheduler.syncNow()).toEqual(emptyReport());
    r.clock.advance(INTERVAL_MS);
    await r.scheduler.beforeToolCall();
    r.scheduler.afterToolCall();
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(r.started).toEqual([]);
  });
});

describe('the finish', () => {
  it('starts its own passes even once closed', async () => {
    const r = rig();
    r.closed.value = true;
    await r.scheduler.start(undefined, 'final');
    await r.scheduler.start(undefined, 'flush');
    expect(r.started).toEqual(['final', 'flush']);
  });

  it('a pass that starts covers the calls before it: the armed trailing sync is dropped', async () => {
    const r = rig();
    await r.scheduler.beforeToolCall();
    r.scheduler.afterToolCall(); // arms the trailing sync
    await r.scheduler.start(undefined, 'final');
    r.clock.advance(INTERVAL_MS);
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(r.started).toEqual(['final']);
  });
});

describe('when the session goes idle', () => {
  it('pushes at once, push-only, without starting the interval over or dropping the trailing sync', async () => {
    const r = rig();
    await r.scheduler.beforeToolCall();
    r.scheduler.afterToolCall(); // arms the trailing sync
    r.clock.advance(1_000);
    r.scheduler.sessionIdle();
    await vi.advanceTimersByTimeAsync(0);
    expect(r.started).toEqual(['flush']);
    // The trailing sync still comes when the interval (counted from the download) has passed.
    r.clock.advance(INTERVAL_MS - 1_000);
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(r.started).toEqual(['flush', 'sync']);
  });

  it('pushes once the running sync ends, and one push covers several idles meanwhile', async () => {
    const r = rig({ hold: true });
    const syncing = r.scheduler.syncNow();
    await vi.advanceTimersByTimeAsync(0);
    expect(r.started).toEqual(['sync']);
    r.scheduler.sessionIdle();
    r.scheduler.sessionIdle();
    r.release();
    await syncing;
    await vi.advanceTimersByTimeAsync(0);
    expect(r.started).toEqual(['sync', 'flush']);
    r.release();
    await vi.advanceTimersByTimeAsync(0);
    expect(r.started).toEqual(['sync', 'flush']);
    expect(r.peak()).toBe(1);
  });

  it('does nothing while a tool call runs, or once closed', async () => {
    const r = rig();
    await r.scheduler.beforeToolCall();
    r.scheduler.sessionIdle();
    await vi.advanceTimersByTimeAsync(0);
    expect(r.started).toEqual([]);
    r.scheduler.afterToolCall();
    r.closed.value = true;
    r.scheduler.sessionIdle();
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(r.started).toEqual([]);
  });

  it('bounds the push by the flush bound: its signal aborts when the bound passes', async () => {
    const signals: AbortSignal[] = [];
    const r = rig({ hold: true, onSignal: (s) => signals.push(s) });
    r.scheduler.sessionIdle();
    await vi.advanceTimersByTimeAsync(PUSH_BOUND_MS - 1);
    expect(signals[0]!.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(signals[0]!.aborted).toBe(true);
    r.release();
  });
});
