// Pins the manual clock the worker tests drive time with, and the waits of src/internal/abort.ts
// on it: callbacks run in due order (ties in scheduling order) with the clock reading their due
// time, cancelled ones never run, code a callback resumes runs before the next one fires, and
// sleep / combineSignals wait on the clock they are given.
import { describe, expect, it } from 'vitest';
import { combineSignals, sleep } from '../../src/internal/abort.js';
import { ManualClock } from '../../src/internal/manual-clock.js';

describe('ManualClock', () => {
  it('runs due callbacks earliest first, ties in scheduling order, each at its due time', async () => {
    const clock = new ManualClock(0);
    const ran: Array<[string, number]> = [];
    clock.schedule(30, () => ran.push(['c', clock.now()]));
    clock.schedule(10, () => ran.push(['a', clock.now()]));
    clock.schedule(10, () => ran.push(['b', clock.now()]));
    clock.schedule(-5, () => ran.push(['now', clock.now()]));
    await clock.advance(29);
    expect(ran).toEqual([
      ['now', 0],
      ['a', 10],
      ['b', 10],
    ]);
    expect(clock.now()).toBe(29);
    expect(clock.nextDueInMs).toBe(1);
    await clock.advance(1);
    expect(ran.map(([n]) => n)).toEqual(['now', 'a', 'b', 'c']);
    expect(clock.pendingTimers).toBe(0);
    expect(clock.nextDueInMs).toBeUndefined();
  });

  it('never runs a cancelled callback, and a second cancel does nothing', async () => {
    const clock = new ManualClock(0);
    let ran = false;
    const cancel = clock.schedule(5, () => (ran = true));
    cancel();
    cancel();
    await clock.advance(10);
    expect(ran).toBe(false);
    expect(clock.pendingTimers).toBe(0);
  });

  it('lets the code a callback resumes schedule the next wait within the same advance', async () => {
    const clock = new ManualClock(0);
    const wokeAt: number[] = [];
    const loop = (async () => {
      for (let i = 0; i < 3; i++) {
        await sleep(100, undefined, clock);
        wokeAt.push(clock.now());
      }
    })();
    await clock.advance(300);
    await loop;
    expect(wokeAt).toEqual([100, 200, 300]);
  });
});

describe('waits on an injected clock', () => {
  it('sleep resolves only once the clock has moved its time, and rejects at once on abort', async () => {
    const clock = new ManualClock(0);
    let done = false;
    const p = sleep(50, undefined, clock).then(() => (done = true));
    await clock.advance(49);
    expect(done).toBe(false);
    await clock.advance(1);
    await p;
    expect(done).toBe(true);

    const ctrl = new AbortController();
    const aborted = sleep(50, ctrl.signal, clock);
    ctrl.abort(new Error('stop'));
    await expect(aborted).rejects.toThrow('stop');
    expect(clock.pendingTimers).toBe(0);
  });

  it('combineSignals times out on the clock, and dispose() cancels its timer', async () => {
    const clock = new ManualClock(0);
    const cut = combineSignals([], 1_000, clock);
    await clock.advance(999);
    expect(cut.signal.aborted).toBe(false);
    await clock.advance(1);
    expect(cut.signal.aborted).toBe(true);
    expect((cut.signal.reason as Error).name).toBe('TimeoutError');
    cut.dispose();

    const kept = combineSignals([], 1_000, clock);
    kept.dispose();
    expect(clock.pendingTimers).toBe(0);
    await clock.advance(5_000);
    expect(kept.signal.aborted).toBe(false);
  });
});
