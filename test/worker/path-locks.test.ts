// Pins per-mount-path exclusion inside one process: overlapping paths (equal, or one inside the
// other) are never held by two sessions; a waiter gets the paths as soon as they are free, fails
// after its bound (on its clock) with an error naming the path and the holder, and can be aborted.
import { describe, expect, it } from 'vitest';
import { MemoryMountError } from '../../src/errors.js';
import { ManualClock } from '../../src/internal/manual-clock.js';
import { overlaps, PathLocks } from '../../src/worker/path-locks.js';

const A = { sessionId: 'sesn_a', workId: 'work_a' };
const B = { sessionId: 'sesn_b', workId: 'work_b' };
const C = { sessionId: 'sesn_c', workId: 'work_c' };

describe('overlaps', () => {
  const rows = [
    { description: 'equal paths overlap', a: '/m/x', b: '/m/x', expected: true },
    { description: 'a child overlaps its parent', a: '/m/x/y', b: '/m/x', expected: true },
    { description: 'a parent overlaps its child', a: '/m/x', b: '/m/x/y', expected: true },
    { description: 'siblings sharing a prefix do not overlap', a: '/m/x', b: '/m/xy', expected: false },
    { description: 'unrelated paths do not overlap', a: '/m/a', b: '/n/a', expected: false },
  ];
  for (const row of rows) it(row.description, () => expect(overlaps(row.a, row.b)).toBe(row.expected));
});

describe('PathLocks', () => {
  it('grants free paths at once and frees them on release', async () => {
    const locks = new PathLocks();
    const release = await locks.acquire(['/m/a', '/m/b'], A, { waitMs: 10 });
    expect(
      locks
        .snapshot()
        .map((h) => h.path)
        .sort(),
    ).toEqual(['/m/a', '/m/b']);
    release();
    release();
    expect(locks.snapshot()).toEqual([]);
  });

  it('makes a second session wait until the first releases the path', async () => {
    const locks = new PathLocks();
    const releaseA = await locks.acquire(['/m/a'], A, { waitMs: 1000 });
    let granted = false;
    const pending = locks.acquire(['/m/a/inner'], B, { waitMs: 1000 }).then((r) => {
      granted = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(granted).toBe(false);
    releaseA();
    const releaseB = await pending;
    expect(granted).toBe(true);
    expect(locks.snapshot()).toEqual([{ path: '/m/a/inner', ...B }]);
    releaseB();
  });

  it('fails once the bound has passed on its clock, with a message naming the path and the holding session', async () => {
    const clock = new ManualClock();
    const locks = new PathLocks(clock);
    await locks.acquire(['/m/a'], A, { waitMs: 10 });
    let settled = false;
    const waiting = locks
      .acquire(['/m/b', '/m/a'], B, { waitMs: 30_000 })
      .catch((e: unknown) => e)
      .finally(() => (settled = true));
    await clock.advance(29_999);
    expect(settled).toBe(false);
    await clock.advance(1);
    const err = await waiting;
    expect(err).toBeInstanceOf(MemoryMountError);
    expect((err as MemoryMountError).path).toBe('/m/a');
    expect((err as Error).message).toContain('/m/a is in use by session sesn_a (work item work_a)');
    expect((err as Error).message).toContain('session sesn_b');
    // The failed waiter took nothing.
    expect(locks.snapshot().map((h) => h.path)).toEqual(['/m/a']);
  });

  it('rejects with the abort reason when the waiter is aborted', async () => {
    const locks = new PathLocks();
    await locks.acquire(['/m/a'], A, { waitMs: 10 });
    const ctrl = new AbortController();
    const pending = locks.acquire(['/m/a'], B, { waitMs: 10_000, signal: ctrl.signal });
    ctrl.abort(new Error('closing'));
    await expect(pending).rejects.toThrow('closing');
  });

  it('serves waiters in arrival order when they want the same path', async () => {
    const locks = new PathLocks();
    const releaseA = await locks.acquire(['/m/a'], A, { waitMs: 10 });
    const order: string[] = [];
    const b = locks.acquire(['/m/a'], B, { waitMs: 1000 }).then((r) => (order.push('b'), r));
    const c = locks.acquire(['/m/a'], C, { waitMs: 1000 }).then((r) => (order.push('c'), r));
    releaseA();
    (await b)();
    (await c)();
    expect(order).toEqual(['b', 'c']);
  });

  it('lets a waiter for an unrelated path through while an earlier waiter is blocked', async () => {
    const locks = new PathLocks();
    await locks.acquire(['/m/a'], A, { waitMs: 10 });
    void locks.acquire(['/m/a'], B, { waitMs: 200 }).catch(() => {});
    const release = await locks.acquire(['/m/z'], C, { waitMs: 50 });
    expect(typeof release).toBe('function');
  });
});
