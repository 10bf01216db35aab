// Pins how the poller claims a backlog when it is given session slots: each poll holds a slot, the
// next poll goes out while the item before it is being acknowledged, each poll that brings an item
// starts one more while a slot is free, and polls in flight + items being acknowledged + items
// running never exceed the slots. A poll that brings nothing, or fails, ends its loop unless it is
// the last one; an item whose ack fails gives its slot back; an acknowledged item is handed out even
// when the caller stops; a permanent 4xx ends the claims once the acks in flight have settled.
// Without slots (a "slot is free" wait only) the poller claims one item at a time. A callback that
// throws ends the claims with its error.
import { APIError } from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { RemoteApiError } from '../../src/errors.js';
import { ManualClock } from '../../src/internal/manual-clock.js';
import { Poller, type ClaimSlots, type ClaimedWork, type WorkQueueApi } from '../../src/worker/poller.js';
import { captureLogger } from './helpers.js';

type Polled = Awaited<ReturnType<WorkQueueApi['poll']>>;

interface Deferred<T> {
  resolve: (v: T) => void;
  reject: (e: unknown) => void;
}

const item = (id: string): NonNullable<Polled> =>
  ({ id, environment_id: 'env_1', data: { type: 'session', id: `sesn_${id}` }, secret: 's' }) as unknown as NonNullable<Polled>;
const apiError = (status: number): APIError =>
  new APIError(status, { type: 'error', error: { type: 'x', message: 'm' } }, 'm', new Headers());
const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

/** A work queue whose polls and acks stay open until the test answers them. */
function manualQueue() {
  const polls: Array<Deferred<Polled>> = [];
  const acks = new Map<string, Deferred<unknown>>();
  let inFlight = 0;
  let maxInFlight = 0;
  const api: WorkQueueApi = {
    poll: (_env, _params, { signal }) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      return new Promise<Polled>((resolve, reject) => {
        let open = true;
        const d: Deferred<Polled> = {
          resolve: (v) => {
            if (open) inFlight--;
            open = false;
            resolve(v);
          },
          reject: (e) => {
            if (open) inFlight--;
            open = false;
            reject(e);
          },
        };
        polls.push(d);
        // As the SDK's request does: an aborted poll rejects.
        signal.addEventListener(
          'abort',
          () => {
            polls.splice(polls.indexOf(d), 1);
            d.reject(new Error('aborted'));
          },
          { once: true },
        );
      });
    },
    ack: (workId) => new Promise((resolve, reject) => acks.set(workId, { resolve, reject })),
  };
  return {
    api,
    polls,
    acks,
    get inFlight() {
      return inFlight;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    /** Answer every open poll, oldest first. */
    answerPolls(answer: (k: number) => Polled | Error): void {
      const open = polls.splice(0);
      open.forEach((d, k) => {
        const a = answer(k);
        if (a instanceof Error) d.reject(a);
        else d.resolve(a);
      });
    },
  };
}

/** `capacity` session slots shared by the poller (held) and the items the test runs. */
function slotRig(capacity: number) {
  let held = 0;
  let running = 0;
  let peak = 0;
  const waiters: Array<() => void> = [];
  const used = (): number => held + running;
  const note = (): void => {
    peak = Math.max(peak, used());
  };
  const wake = (): void => waiters.shift()?.();
  const slots: ClaimSlots = {
    reserve: (signal) =>
      new Promise((resolve) => {
        const attempt = (): void => {
          if (signal.aborted) return resolve(false);
          if (used() >= capacity) return void waiters.push(attempt);
          held++;
          note();
          resolve(true);
        };
        attempt();
      }),
    tryReserve: () => {
      if (used() >= capacity) return false;
      held++;
      note();
      return true;
    },
    release: () => {
      held--;
      wake();
    },
  };
  return {
    slots,
    get held() {
      return held;
    },
    get peak() {
      return peak;
    },
    /** The caller took an item: its slot moves from the poller to the running item. */
    take(): void {
      held--;
      running++;
    },
    /** A running item ended. */
    end(): void {
      running--;
      wake();
    },
    wakeAll(): void {
      for (const w of waiters.splice(0)) w();
    },
  };
}

/** A rig of 4 slots whose first poll answered `w1`, now being acknowledged. */
async function rigWithW1InAck(): Promise<ReturnType<typeof rig>> {
  const r = rig(4);
  await settle();
  r.queue.answerPolls(() => item('w1'));
  await settle();
  return r;
}

/**
 * A backlog: `rounds` times, every poll in flight gets a fresh item and every ack succeeds.
 * Returns how many items were answered.
 */
async function backlogRounds(r: ReturnType<typeof rig>, rounds: number): Promise<number> {
  let n = 0;
  for (let round = 0; round < rounds; round++) {
    await settle();
    r.queue.answerPolls(() => item(`w${++n}`));
    await settle();
    for (const [id, d] of r.queue.acks) {
      d.resolve({});
      r.queue.acks.delete(id);
    }
  }
  return n;
}

function rig(capacity: number) {
  const queue = manualQueue();
  const slots = slotRig(capacity);
  const capture = captureLogger();
  const clock = new ManualClock(0);
  const poller = new Poller({
    api: queue.api,
    environmentId: 'env_1',
    workerId: 'worker_1',
    logger: capture.logger,
    clock,
    random: () => 0,
    slots: slots.slots,
  });
  const ctrl = new AbortController();
  const claims = poller.claims(ctrl.signal);
  const taken: ClaimedWork[] = [];
  let done = false;
  let error: unknown;
  // The caller: takes each item as it is handed out.
  const consuming = (async () => {
    try {
      for await (const w of claims) {
        slots.take();
        taken.push(w);
      }
    } catch (e) {
      error = e;
    } finally {
      done = true;
    }
  })();
  return {
    queue,
    slots,
    capture,
    clock,
    ctrl,
    taken,
    consuming,
    get done() {
      return done;
    },
    get error() {
      return error;
    },
  };
}

describe('Poller with session slots', () => {
  it('polls the next item while the one before is acknowledged, and adds a poll per item while slots are free', async () => {
    const r = rig(4);
    await settle();
    expect(r.queue.inFlight).toBe(1);
    r.queue.answerPolls(() => item('w1'));
    await settle();
    // w1's ack is still open: its loop polls again, and the item started one more loop.
    expect([...r.queue.acks.keys()]).toEqual(['w1']);
    expect(r.queue.inFlight).toBe(2);
    r.queue.answerPolls((k) => item(`w${k + 2}`));
    await settle();
    // 3 items acknowledging + 1 poll = 4 slots: no second extra poll.
    expect(r.queue.inFlight).toBe(1);
    expect(r.slots.held).toBe(4);
    for (const d of r.queue.acks.values()) d.resolve({});
    await settle();
    expect(r.taken.map((w) => w.id)).toEqual(['w1', 'w2', 'w3']);
    r.queue.answerPolls(() => item('w4'));
    await settle();
    // All 4 slots are taken (3 running, 1 acknowledging): nothing more is polled.
    expect(r.queue.inFlight).toBe(0);
    r.queue.acks.get('w4')!.resolve({});
    await settle();
    expect(r.taken).toHaveLength(4);
    expect(r.queue.inFlight).toBe(0);
    r.slots.end();
    await settle();
    expect(r.queue.inFlight).toBe(1);
    expect(r.slots.peak).toBeLessThanOrEqual(4);
    expect(r.queue.maxInFlight).toBe(2);
    r.ctrl.abort();
    r.slots.wakeAll();
    await r.consuming;
  });

  it('grows to several polls in flight on a backlog and back to one when the queue runs dry, never past the slots', async () => {
    const r = rig(16);
    const n = await backlogRounds(r, 4);
    await settle();
    // 1, 2, 4, 8 polls in the four rounds.
    expect(n).toBe(15);
    expect(r.queue.maxInFlight).toBe(8);
    expect(r.slots.peak).toBeLessThanOrEqual(16);
    r.queue.answerPolls(() => null);
    await settle();
    await r.clock.advance(1_000);
    // Every poll came back empty: one loop keeps polling (after its pause).
    expect(r.queue.inFlight).toBe(1);
    expect(r.taken).toHaveLength(15);
    expect(r.slots.held).toBe(1);
    r.ctrl.abort();
    await r.consuming;
    expect(r.slots.held).toBe(0);
  });

  it('cuts every poll in flight short when the caller stops, and holds no slot afterwards', async () => {
    const r = rig(16);
    await backlogRounds(r, 3);
    await settle();
    expect(r.queue.inFlight).toBe(8);
    r.ctrl.abort();
    await r.consuming;
    expect(r.queue.inFlight).toBe(0);
    expect(r.taken).toHaveLength(7);
    expect(r.slots.held).toBe(0);
  });

  it('gives the slot back when an ack fails, and hands out only acknowledged items', async () => {
    const r = await rigWithW1InAck();
    r.queue.acks.get('w1')!.reject(apiError(500));
    await settle();
    expect(r.taken).toEqual([]);
    expect(r.capture.lines.some((l) => l.msg === 'ack failed; the item is left for the server to hand out again')).toBe(true);
    // Two polls in flight, nothing else held.
    expect(r.slots.held).toBe(r.queue.inFlight);
    r.ctrl.abort();
    await r.consuming;
    expect(r.slots.held).toBe(0);
  });

  it('leaves the backing off to the last loop when a poll fails while others are in flight', async () => {
    const r = await rigWithW1InAck();
    expect(r.queue.inFlight).toBe(2);
    r.queue.answerPolls((k) => (k === 0 ? new Error('connection reset') : null));
    await settle();
    // One loop failed and one came back empty: one of them polls on (after its pause), the other ended.
    expect(r.slots.held).toBe(2);
    await r.clock.advance(2_000);
    expect(r.queue.inFlight).toBe(1);
    r.ctrl.abort();
    r.queue.acks.get('w1')!.resolve({});
    await r.consuming;
    expect(r.taken.map((w) => w.id)).toEqual(['w1']);
  });

  it('hands out an item whose ack was in flight when the caller stopped, then ends', async () => {
    const r = await rigWithW1InAck();
    r.ctrl.abort();
    await settle();
    expect(r.done).toBe(false);
    r.queue.acks.get('w1')!.resolve({});
    await r.consuming;
    expect(r.taken.map((w) => w.id)).toEqual(['w1']);
    expect(r.error).toBeUndefined();
    expect(r.slots.held).toBe(0);
  });

  it('ends with a RemoteApiError on a permanent 4xx, after the acks in flight have settled', async () => {
    const r = await rigWithW1InAck();
    r.queue.answerPolls(() => apiError(401));
    await settle();
    // The other poll is cut off; the worker still gets w1 once it is acknowledged.
    expect(r.done).toBe(false);
    r.queue.answerPolls(() => null);
    r.queue.acks.get('w1')!.resolve({});
    await r.consuming;
    expect(r.taken.map((w) => w.id)).toEqual(['w1']);
    expect(r.error).toBeInstanceOf(RemoteApiError);
    expect(r.error).toMatchObject({ status: 401 });
    expect(r.slots.held).toBe(0);
  });
});

/** A poller of `env_1` on `queue`, with a manual clock and a discarded log, plus `extra` options. */
function pollerOn(queue: ReturnType<typeof manualQueue>, extra: Partial<ConstructorParameters<typeof Poller>[0]>): Poller {
  return new Poller({
    api: queue.api,
    environmentId: 'env_1',
    workerId: 'worker_1',
    logger: captureLogger().logger,
    clock: new ManualClock(0),
    ...extra,
  });
}

describe('Poller whose callback throws', () => {
  it('ends the claims with that error instead of leaving it unhandled', async () => {
    const queue = manualQueue();
    const slots = slotRig(4);
    const boom = new Error('listener bug');
    const poller = pollerOn(queue, {
      slots: slots.slots,
      onPolled: () => {
        throw boom;
      },
    });
    const next = poller.claims(new AbortController().signal).next();
    await settle();
    queue.answerPolls(() => null);
    await expect(next).rejects.toBe(boom);
    expect(slots.held).toBe(0);
  });
});

describe('Poller without session slots', () => {
  it('claims one item at a time: no poll before the item before it was taken', async () => {
    const queue = manualQueue();
    let free = true;
    const poller = pollerOn(queue, {
      waitForSlot: async () => {
        while (!free) await settle();
      },
    });
    const ctrl = new AbortController();
    const claims = poller.claims(ctrl.signal);
    const first = claims.next();
    await settle();
    queue.answerPolls(() => item('w1'));
    await settle();
    expect(queue.inFlight).toBe(0);
    queue.acks.get('w1')!.resolve({});
    expect((await first).value).toMatchObject({ id: 'w1' });
    // The caller starts w1 and fills the only slot before asking for more.
    free = false;
    const second = claims.next();
    await settle();
    expect(queue.inFlight).toBe(0);
    expect(queue.maxInFlight).toBe(1);
    free = true;
    await settle();
    expect(queue.inFlight).toBe(1);
    ctrl.abort();
    queue.answerPolls(() => null);
    expect(await second).toEqual({ done: true, value: undefined });
  });
});
