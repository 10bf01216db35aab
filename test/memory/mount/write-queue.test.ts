/**
 * Pins the queue that writes a listing's downloads behind it: items are written in order, after
 * the pusher's turn; a push past the high-water mark returns a promise that settles once the queue
 * has room; the first failed write stops the queue, drops what waits and is reported by every
 * later push and by drained(); batch hooks bracket each run of writes, and a failing end fails the
 * queue; an item let in by the bytes the last write gave back is written before drained() resolves.
 */
import { describe, expect, it } from 'vitest';
import { ByteBudget } from '../../../src/memory/remote/byte-budget.js';
import { WriteQueue } from '../../../src/memory/mount/write-queue.js';

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('a write queue', () => {
  it('writes every item in order, never during the turn that pushed it', async () => {
    const written: number[] = [];
    const q = new WriteQueue<number>(async (n) => void written.push(n), { highWater: 100, batch: 2 });
    for (let i = 0; i < 5; i++) expect(q.push(i)).toBeUndefined();
    expect(written).toEqual([]);
    await q.drained();
    expect(written).toEqual([0, 1, 2, 3, 4]);
  });

  it('makes the pusher wait past the high-water mark, until the queue has room', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const q = new WriteQueue<number>(() => gate, { highWater: 2, batch: 8 });
    expect(q.push(1)).toBeUndefined();
    const full = q.push(2);
    expect(full).toBeInstanceOf(Promise);
    let settled = false;
    void full!.then(() => (settled = true));
    await tick();
    await tick();
    expect(settled).toBe(false);
    release();
    await full;
    await q.drained();
  });

  it('stops at the first failed write: what waits is dropped and the failure is reported', async () => {
    const written: number[] = [];
    const boom = new Error('disk full');
    const q = new WriteQueue<number>(
      async (n) => {
        if (n === 1) throw boom;
        written.push(n);
      },
      { highWater: 100, batch: 8 },
    );
    for (let i = 0; i < 4; i++) q.push(i);
    await expect(q.drained()).rejects.toBe(boom);
    expect(written).toEqual([0]);
    await expect(q.push(9)).rejects.toBe(boom);
  });

  it('rejects a pusher waiting for room when a write fails', async () => {
    const boom = new Error('refused');
    const q = new WriteQueue<number>(
      async () => {
        await tick();
        throw boom;
      },
      { highWater: 1, batch: 8 },
    );
    await expect(q.push(1)).rejects.toBe(boom);
    await q.settled();
  });

  it('drops what waits once stopped, and settles without throwing', async () => {
    const written: number[] = [];
    const q = new WriteQueue<number>(async (n) => void written.push(n), { highWater: 100, batch: 8 });
    for (let i = 0; i < 3; i++) q.push(i);
    q.stop();
    await q.settled();
    expect(written).toEqual([]);
  });
  it('brackets each run of writes between two yields with the batch hooks', async () => {
    const events: string[] = [];
    const q = new WriteQueue<number>(async (n) => void events.push(`w${n}`), {
      highWater: 100,
      batch: 2,
      hooks: { begin: () => void events.push('begin'), end: (failed) => void events.push(failed ? 'end!' : 'end') },
    });
    for (let i = 0; i < 5; i++) q.push(i);
    await q.drained();
    expect(events).toEqual(['begin', 'w0', 'w1', 'end', 'begin', 'w2', 'w3', 'end', 'begin', 'w4', 'end']);
  });

  it("fails as a write does when a batch's end throws, and ends a batch cut by a failed write as failed", async () => {
    const ends: boolean[] = [];
    const refused = new WriteQueue<number>(async () => undefined, {
      highWater: 100,
      batch: 2,
      hooks: { begin: () => undefined, end: () => Promise.reject(new Error('folder replaced')) },
    });
    refused.push(1);
    refused.push(2);
    refused.push(3);
    await expect(refused.drained()).rejects.toThrow('folder replaced');
    await expect(refused.push(4)).rejects.toThrow('folder replaced');
    const cut = new WriteQueue<number>(
      async (n) => {
        if (n === 1) throw new Error('disk full');
      },
      { highWater: 100, batch: 4, hooks: { begin: () => undefined, end: (failed) => void ends.push(failed) } },
    );
    cut.push(0);
    cut.push(1);
    cut.push(2);
    await expect(cut.drained()).rejects.toThrow('disk full');
    expect(ends).toEqual([true]);
  });

  it('writes an item whose bytes the last write of a run gave back, before drained() resolves (synchronous writes and hooks)', async () => {
    const written: number[] = [];
    const budget = new ByteBudget(10);
    const q = new WriteQueue<number>((n) => void written.push(n), {
      highWater: 100,
      batch: 8,
      hooks: { begin: () => undefined, end: () => undefined },
      bytes: { budget, sizeOf: () => 10 },
    });
    expect(q.push(1)).toBeUndefined();
    // Waits for the bytes of item 1, given back by its write: the run ends right after it.
    const second = q.push(2);
    expect(second).toBeInstanceOf(Promise);
    await second;
    await q.drained();
    expect(written).toEqual([1, 2]);
    expect(budget.used).toBe(0);
  });
});
