// Pins the byte budget a mount's buffers share: grants fit the bound (or go alone), first come
// first served, an aborted waiter takes nothing; and a write queue counted in it never holds more.
import { describe, expect, it } from 'vitest';
import { ByteBudget } from '../../../src/memory/remote/byte-budget.js';
import { WriteQueue } from '../../../src/memory/mount/write-queue.js';

describe('ByteBudget', () => {
  it('grants what fits, one grant alone past the bound, and serves waiters in order', async () => {
    const b = new ByteBudget(100);
    expect(b.tryTake(60)).toBe(true);
    expect(b.tryTake(50)).toBe(false);
    const order: string[] = [];
    const big = b.take(50).then(() => order.push('50'));
    const small = b.take(10).then(() => order.push('10'));
    // The small one fits but waits behind the big one: no starvation.
    await Promise.resolve();
    expect(order).toEqual([]);
    b.give(60);
    await Promise.all([big, small]);
    expect(order).toEqual(['50', '10']);
    b.give(60);
    expect(b.used).toBe(0);
    expect(b.tryTake(500)).toBe(true);
    expect(b.peak).toBe(500);
  });

  it('rejects an aborted waiter and serves the ones behind it', async () => {
    const b = new ByteBudget(100);
    b.tryTake(90);
    const ctrl = new AbortController();
    const blocked = b.take(50, ctrl.signal);
    const behind = b.take(5);
    ctrl.abort(new Error('gone'));
    await expect(blocked).rejects.toThrow('gone');
    await behind;
    expect(b.used).toBe(95);
  });
});

describe('WriteQueue counted in a byte budget', () => {
  it('never holds more queued bytes than the bound, and gives everything back', async () => {
    const budget = new ByteBudget(1000);
    let maxUsed = 0;
    const written: number[] = [];
    const q = new WriteQueue<number>(
      async (n) => {
        maxUsed = Math.max(maxUsed, budget.used);
        await new Promise((r) => setImmediate(r));
        written.push(n);
      },
      { highWater: 1000, batch: 4, bytes: { budget, sizeOf: (n) => n } },
    );
    const sizes = Array.from({ length: 40 }, (_, i) => 100 + (i % 7) * 50);
    for (const n of sizes) await q.push(n);
    await q.drained();
    expect(written).toEqual(sizes);
    expect(maxUsed).toBeLessThanOrEqual(1000);
    expect(budget.peak).toBeLessThanOrEqual(1000);
    expect(budget.peak).toBeGreaterThan(600);
    expect(budget.used).toBe(0);
  });

  it('gives back the bytes of what it drops, and rejects a push waiting for bytes once stopped', async () => {
    const budget = new ByteBudget(300);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const q = new WriteQueue<number>(() => gate, { highWater: 100, batch: 10, bytes: { budget, sizeOf: (n) => n } });
    expect(q.push(200)).toBeUndefined();
    expect(q.push(100)).toBeUndefined();
    const waiting = q.push(100);
    expect(waiting).toBeInstanceOf(Promise);
    q.stop();
    await expect(waiting).rejects.toThrow(/stopped/);
    release();
    await q.settled();
    expect(budget.used).toBe(0);
  });
});
