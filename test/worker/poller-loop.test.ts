// Pins the poll loop's timing on a manual clock, against a plain-object work queue: an idle loop
// logs its first empty poll at info, later ones at debug and a reminder at info every 5 minutes;
// an empty answer faster than the server's hold pauses before the next poll; failed polls back off
// 1 s, 2 s, 4 s … up to 60 s and start over after a success; a permanent 4xx ends the loop with a
// RemoteApiError; a polled item is acknowledged before it is handed out.
import { APIError } from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { RemoteApiError } from '../../src/errors.js';
import { ManualClock } from '../../src/internal/manual-clock.js';
import { Poller, type WorkQueueApi } from '../../src/worker/poller.js';
import { captureLogger } from './helpers.js';

type Polled = Awaited<ReturnType<WorkQueueApi['poll']>>;
type Answer = Polled | Error;

const item = (id: string): NonNullable<Polled> =>
  ({ id, environment_id: 'env_1', data: { type: 'session', id: `sesn_${id}` }, secret: 's' }) as unknown as NonNullable<Polled>;
const apiError = (status: number): APIError =>
  new APIError(status, { type: 'error', error: { type: 'x', message: 'm' } }, 'm', new Headers());

/** A poller on a manual clock whose queue gives `answers` in turn, then `fallback` forever. */
function rig(answers: Answer[], fallback: Answer) {
  const clock = new ManualClock(0);
  const capture = captureLogger();
  const polledAt: number[] = [];
  const acked: string[] = [];
  const retries: number[] = [];
  let i = 0;
  const api: WorkQueueApi = {
    poll: () => {
      polledAt.push(clock.now());
      const a = i < answers.length ? answers[i++]! : fallback;
      return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
    },
    ack: (workId) => {
      acked.push(workId);
      return Promise.resolve({});
    },
  };
  const poller = new Poller({
    api,
    environmentId: 'env_1',
    workerId: 'worker_1',
    logger: capture.logger,
    clock,
    random: () => 0,
    onPollFailed: (_e, retryInMs) => retries.push(retryInMs),
  });
  const ctrl = new AbortController();
  return { clock, capture, polledAt, acked, retries, ctrl, claims: poller.claims(ctrl.signal) };
}

const count = (c: ReturnType<typeof captureLogger>, msg: string): number => c.lines.filter((l) => l.msg === msg).length;

describe('Poller', () => {
  it('logs the first empty poll at info, later ones at debug, and a reminder every 5 minutes', async () => {
    const r = rig([], null);
    const next = r.claims.next();
    await r.clock.advance(299_999);
    expect(count(r.capture, 'idle; polling for work')).toBe(1);
    expect(count(r.capture, 'still idle; polling for work')).toBe(0);
    await r.clock.advance(1);
    const reminder = r.capture.lines.filter((l) => l.msg === 'still idle; polling for work');
    expect(reminder).toHaveLength(1);
    expect(reminder[0]).toMatchObject({ level: 30, idle_ms: 300_000 });
    expect(count(r.capture, 'poll returned no work')).toBe(r.polledAt.length - 2);
    r.ctrl.abort();
    await r.clock.advance(1_000);
    expect(await next).toEqual({ done: true, value: undefined });
  });

  it('pauses between empty answers the server did not hold, so an empty queue is not polled in a tight loop', async () => {
    const r = rig([], null);
    const next = r.claims.next();
    await r.clock.advance(1_000);
    // random() is 0: each pause is the 200 ms floor.
    expect(r.polledAt).toEqual([0, 200, 400, 600, 800, 1_000]);
    r.ctrl.abort();
    await r.clock.advance(1_000);
    await next;
  });

  it('backs off 1 s, 2 s, 4 s … up to 60 s after failed polls, and starts over after a success', async () => {
    const failures = Array.from({ length: 8 }, () => new Error('connection reset'));
    const r = rig([...failures, item('w1'), new Error('connection reset')], null);
    const next = r.claims.next();
    await r.clock.advance(200_000);
    const first = await next;
    expect(first.value).toMatchObject({ id: 'w1', environmentId: 'env_1', secret: 's' });
    expect(r.acked).toEqual(['w1']);
    expect(r.retries).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
    expect(r.polledAt.slice(1, 9).map((t, k) => t - r.polledAt[k]!)).toEqual(r.retries);
    const again = r.claims.next();
    await r.clock.advance(1_000);
    expect(r.retries.slice(8)).toEqual([1_000]);
    r.ctrl.abort();
    await r.clock.advance(1_000);
    await again;
  });

  it('ends with a RemoteApiError on a permanent 4xx, without retrying', async () => {
    const r = rig([apiError(401)], null);
    const err = await r.claims.next().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RemoteApiError);
    expect(err).toMatchObject({ status: 401, retryable: false });
    expect(r.polledAt).toEqual([0]);
    expect(r.retries).toEqual([]);
  });
});
