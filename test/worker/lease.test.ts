// Pins the lease heartbeat: NO_HEARTBEAT first then an exact echo of last_heartbeat, the interval
// from the server TTL (max(floor, min(ttl/2, cap))), and each ending — 412 lost, stop verdicts,
// a lease not extended (lease_extended anything but true, as SDK 1.16 reads it), permanent 4xx
// rejected, no success within the TTL assumed lost, hung beats cut off — with the first reason
// winning. The first beat claims the item: `claimed` settles with its verdict, and a first beat
// refused for good leaves an item that was never ours (not to be stopped). Uses a plain-object heartbeat API on an injected manual
// clock: small timings first, then the deadline tests with the real default intervals.
import { APIError, APIConnectionError } from '@anthropic-ai/sdk';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { TimerClock } from '../../src/internal/clock.js';
import { ManualClock } from '../../src/internal/manual-clock.js';
import { heartbeatIntervalMs, Lease, NO_HEARTBEAT, type HeartbeatApi } from '../../src/worker/lease.js';

const logger = pino({ level: 'silent' });
type Resp = Awaited<ReturnType<HeartbeatApi['heartbeat']>>;
type Step = Resp | Error | 'hang' | { afterMs: number; then: Resp };

function scriptedApi(steps: Step[], fallback: Step, clock: TimerClock) {
  const sent: string[] = [];
  const sentAt: number[] = [];
  let i = 0;
  const api: HeartbeatApi = {
    heartbeat: (_workId, params, opts) => {
      sent.push(params.expected_last_heartbeat);
      sentAt.push(clock.now());
      const step = i < steps.length ? steps[i++]! : fallback;
      if (step === 'hang') {
        return new Promise((_, reject) =>
          opts.signal.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' }))),
        );
      }
      if ('afterMs' in step) return new Promise((r) => clock.schedule(step.afterMs, () => r(step.then)));
      return step instanceof Error ? Promise.reject(step) : Promise.resolve(step);
    },
  };
  return { api, sent, sentAt };
}

const ok = (last: string, over: Partial<Resp> = {}): Resp => ({
  last_heartbeat: last,
  ttl_seconds: 0,
  state: 'active',
  lease_extended: true,
  ...over,
});
const apiError = (status: number): APIError =>
  new APIError(status, { type: 'error', error: { type: 'x', message: 'm' } }, 'm', new Headers());
const timing = { defaultIntervalMs: 20, defaultTtlMs: 200, floorMs: 10 };

/** A lease with small timings on its own manual clock, and the scripted API it beats against. */
function rig(steps: Step[], fallback: Step, onTtl?: (ttlMs: number) => void) {
  const clock = new ManualClock();
  const scripted = scriptedApi(steps, fallback, clock);
  const l = new Lease({ api: scripted.api, workId: 'work_1', environmentId: 'env_1', logger, timing, clock, ...(onTtl ? { onTtl } : {}) });
  return { clock, l, ...scripted };
}

describe('heartbeatIntervalMs', () => {
  const rows = [
    { description: 'half the TTL in the middle', ttl: 20_000, expected: 10_000 },
    { description: 'capped at 30 s for long leases', ttl: 600_000, expected: 30_000 },
    { description: 'never under 1 s for tiny leases', ttl: 1_000, expected: 1_000 },
  ];
  for (const r of rows) it(r.description, () => expect(heartbeatIntervalMs(r.ttl)).toBe(r.expected));
});

describe('Lease', () => {
  it('sends NO_HEARTBEAT first and echoes last_heartbeat exactly', async () => {
    const { clock, l, sent, sentAt } = rig([ok('2026-01-01T00:00:00.000001Z'), ok('t2'), ok('t3')], ok('t4'));
    const t0 = clock.now();
    l.start();
    await clock.advance(60);
    await l.release();
    expect(sent.slice(0, 4)).toEqual([NO_HEARTBEAT, '2026-01-01T00:00:00.000001Z', 't2', 't3']);
    expect(sentAt.slice(0, 4).map((t) => t - t0)).toEqual([0, 20, 40, 60]);
    expect(l.reason).toBe('done');
    expect(l.lost).toBe(false);
  });

  it('follows the server TTL', async () => {
    const ttls: number[] = [];
    const { clock, l } = rig([ok('a', { ttl_seconds: 3 })], ok('b'), (t) => ttls.push(t));
    l.start();
    await clock.advance(0);
    expect(l.ttlMs).toBe(3000);
    expect(ttls).toEqual([3000]);
    await l.release();
  });

  describe('when the heartbeat answers 412', () => {
    it('ends as lease_lost, which means the item must not be stopped', async () => {
      const { clock, l } = rig([ok('a'), apiError(412)], ok('x'));
      l.start();
      await clock.advance(20);
      expect(l.signal.aborted).toBe(true);
      expect(l.reason).toBe('lease_lost');
      expect(l.lost).toBe(true);
    });

    // A beat whose answer was lost (a cut body, a dropped connection) may have reached the server.
    const cut = (): Error => new APIConnectionError({ message: 'Connection error.', cause: new TypeError('terminated') });
    const precondition = (serverLast: string): APIError =>
      new APIError(
        412,
        {
          type: 'error',
          error: {
            type: 'invalid_request_error',
            message: 'm',
            details: {
              error_code: 'heartbeat_precondition_failed',
              current_state: { state: 'active', last_heartbeat: serverLast, ttl_seconds: 0 },
            },
          },
        },
        'm',
        new Headers(),
      );

    it("after a beat without an answer, while the lease is still ours: goes on from the server's last_heartbeat, at once, and holds", async () => {
      const { clock, l, sent, sentAt } = rig([ok('a'), cut(), precondition('b'), ok('c')], ok('d'));
      const t0 = clock.now();
      l.start();
      await clock.advance(80);
      expect(l.signal.aborted).toBe(false);
      expect(sent.slice(0, 5)).toEqual([NO_HEARTBEAT, 'a', 'a', 'b', 'c']);
      // The beat with the server's value follows the 412 at once.
      expect(sentAt[3]! - t0).toBe(sentAt[2]! - t0);
      await l.release();
      expect(l.reason).toBe('done');
    });

    it("takes the server's value once: a second 412 ends the lease as lost", async () => {
      const { clock, l, sent } = rig([ok('a'), cut(), precondition('b'), precondition('c')], ok('x'));
      l.start();
      await clock.advance(60);
      expect(sent.slice(0, 4)).toEqual([NO_HEARTBEAT, 'a', 'a', 'b']);
      expect(l.reason).toBe('lease_lost');
    });

    it('without a beat that lost its answer before it, a 412 is a lost lease', async () => {
      const { clock, l } = rig([ok('a'), apiError(503), precondition('b')], ok('x'));
      l.start();
      await clock.advance(60);
      expect(l.reason).toBe('lease_lost');
    });

    it('too close to the end of the lease (another worker may hold the item), a 412 is a lost lease', async () => {
      // Beats fail without an answer from t=20 every 20 ms; at t=160 only 40 ms of the 200 ms lease are left.
      const { clock, l, sent } = rig([ok('a'), cut(), cut(), cut(), cut(), cut(), cut(), cut(), precondition('b')], ok('x'));
      l.start();
      await clock.advance(160);
      expect(sent).toHaveLength(9);
      expect(l.reason).toBe('lease_lost');
    });
  });

  const verdicts = [
    { description: 'state stopping ends it as a server stop', resp: ok('a', { state: 'stopping' }) },
    { description: 'state stopped ends it as a server stop', resp: ok('a', { state: 'stopped' }) },
    { description: 'lease_extended false ends it as a server stop', resp: ok('a', { lease_extended: false }) },
    {
      description: 'lease_extended false on an active item ends it as a server stop',
      resp: ok('a', { state: 'active', lease_extended: false, ttl_seconds: 30 }),
    },
    {
      description: 'an answer without lease_extended ends it as a server stop, as SDK 1.16 reads it',
      resp: { last_heartbeat: 'a', ttl_seconds: 30, state: 'active' } as unknown as Resp,
    },
  ];
  for (const v of verdicts) {
    it(`${v.description} (on the first beat: not claimed)`, async () => {
      const { clock, l } = rig([v.resp], ok('x'));
      l.start();
      await clock.advance(0);
      expect(l.signal.aborted).toBe(true);
      expect(l.reason).toBe('server_stop');
      expect(l.lost).toBe(false);
      expect(await l.claimed).toBe(false);
    });
    it(`${v.description} (on a later beat)`, async () => {
      const { clock, l, sent } = rig([ok('a'), v.resp], ok('x'));
      l.start();
      await clock.advance(0);
      expect(await l.claimed).toBe(true);
      expect(l.signal.aborted).toBe(false);
      await clock.advance(20);
      expect(sent).toEqual([NO_HEARTBEAT, 'a']);
      expect(l.signal.aborted).toBe(true);
      expect(l.reason).toBe('server_stop');
      expect(l.lost).toBe(false);
    });
  }

  it('ends as rejected on a permanent 4xx other than 412 after the claim, and the item stays ours to stop', async () => {
    const { clock, l } = rig([ok('a'), apiError(404)], ok('x'));
    l.start();
    await clock.advance(20);
    expect(l.signal.aborted).toBe(true);
    expect(l.reason).toBe('rejected');
    expect(l.lost).toBe(false);
    expect(l.claimRefused).toBe(false);
    expect((l.rejection as APIError).status).toBe(404);
  });

  describe('the claim (the first beat)', () => {
    it('settles true once the first beat succeeds with the lease extended', async () => {
      const { clock, l } = rig([{ afterMs: 5, then: ok('a') }], ok('x'));
      l.start();
      let verdict: boolean | undefined;
      void l.claimed.then((v) => (verdict = v));
      await clock.advance(4);
      expect(verdict).toBeUndefined();
      await clock.advance(1);
      expect(verdict).toBe(true);
      await l.release();
    });

    it('a 412 on the first beat: not claimed, lost (left to its new owner, never stopped)', async () => {
      const { clock, l } = rig([apiError(412)], ok('x'));
      l.start();
      await clock.advance(0);
      expect(await l.claimed).toBe(false);
      expect(l.reason).toBe('lease_lost');
      expect(l.lost).toBe(true);
    });

    for (const status of [401, 403, 404]) {
      it(`a ${status} on the first beat: not claimed, refused, and counted lost so it is never stopped`, async () => {
        const { clock, l } = rig([apiError(status)], ok('x'));
        l.start();
        await clock.advance(0);
        expect(await l.claimed).toBe(false);
        expect(l.reason).toBe('rejected');
        expect(l.claimRefused).toBe(true);
        expect(l.lost).toBe(true);
        expect((l.rejection as APIError).status).toBe(status);
      });
    }

    it('transient failures before the first success only delay the claim', async () => {
      const { clock, l, sent } = rig([apiError(503), new APIConnectionError({ message: 'reset' }), ok('a')], ok('b'));
      l.start();
      await clock.advance(100);
      expect(await l.claimed).toBe(true);
      expect(sent.slice(0, 3)).toEqual([NO_HEARTBEAT, NO_HEARTBEAT, NO_HEARTBEAT]);
      await l.release();
    });

    it('a lease released before the first answer settles false', async () => {
      const { l } = rig(['hang'], ok('x'));
      l.start();
      await l.release();
      expect(await l.claimed).toBe(false);
    });
  });

  it('keeps going through transient failures that stay within the TTL', async () => {
    const { clock, l, sent } = rig([ok('a'), apiError(503), new APIConnectionError({ message: 'reset' }), ok('b')], ok('c'));
    l.start();
    await clock.advance(120);
    expect(l.signal.aborted).toBe(false);
    await l.release();
    // A failed beat does not advance the echoed value.
    expect(sent.slice(0, 4)).toEqual([NO_HEARTBEAT, 'a', 'a', 'a']);
  });

  it('assumes the lease lost when no beat succeeds within the TTL', async () => {
    const { clock, l } = rig([], apiError(503));
    l.start();
    await clock.advance(199);
    expect(l.signal.aborted).toBe(false);
    await clock.advance(1);
    expect(l.reason).toBe('assumed_lost');
    expect(l.lost).toBe(true);
  });

  it('cuts off a hung beat so the TTL check still fires', async () => {
    const { clock, l } = rig([], 'hang');
    l.start();
    await clock.advance(200);
    expect(l.reason).toBe('assumed_lost');
  });

  it('keeps the first reason when it ends twice', async () => {
    const { clock, l } = rig([apiError(412)], ok('x'));
    l.start();
    await clock.advance(0);
    await l.release();
    expect(l.reason).toBe('lease_lost');
  });

  // Server TTL 10 s → beats every 5 s, each cut off after 5 s. The lease must end the moment 10 s
  // have passed since the last successful beat, not at the next failed beat (up to 2× the TTL).
  describe('the TTL deadline', () => {
    function defaultTimingLease(api: HeartbeatApi, clock: ManualClock): Lease {
      return new Lease({ api, workId: 'w', environmentId: 'e', logger, clock });
    }
    const ok10 = (last: string): Resp => ok(last, { ttl_seconds: 10 });

    const failures = [
      { description: 'every later beat hangs', step: 'hang' as const },
      { description: 'every later beat answers 503', step: apiError(503) },
    ];
    for (const f of failures) {
      it(`ends as assumed_lost exactly one TTL after the last success when ${f.description}`, async () => {
        const clock = new ManualClock();
        const { api } = scriptedApi([ok10('a')], f.step, clock);
        const l = defaultTimingLease(api, clock);
        l.start();
        await clock.advance(9_999);
        expect(l.signal.aborted).toBe(false);
        await clock.advance(1);
        expect(l.signal.aborted).toBe(true);
        expect(l.reason).toBe('assumed_lost');
        expect(l.lost).toBe(true);
        await l.release();
        expect(clock.pendingTimers).toBe(0);
      });
    }

    it('keeps the lease when a beat succeeds just before the deadline, and re-arms it from that success', async () => {
      // Beat at 5 s answers after 4.99 s (inside its 5 s cut-off): success at 9.99 s.
      const clock = new ManualClock();
      const { api } = scriptedApi([ok10('a'), { afterMs: 4_990, then: ok10('b') }], 'hang', clock);
      const l = defaultTimingLease(api, clock);
      l.start();
      await clock.advance(10_000);
      expect(l.signal.aborted).toBe(false);
      expect(l.beats).toBe(2);
      await clock.advance(9_989); // 19.989 s: 9.999 s since the last success
      expect(l.signal.aborted).toBe(false);
      await clock.advance(1);
      expect(l.reason).toBe('assumed_lost');
    });

    // A beat every ttl/2: after one failure, waiting a whole interval would put the retry on the
    // deadline, so the retry comes at half the time left (never under a short floor).
    const transient = [
      { description: 'TTL 10 s: the retry comes 2.5 s after the failure', ttlSeconds: 10, sentAt: [0, 5_000, 7_500, 12_500] },
      { description: 'TTL 2 s (1 s floor): the retry comes 0.5 s after the failure', ttlSeconds: 2, sentAt: [0, 1_000, 1_500, 2_500] },
    ];
    for (const t of transient) {
      it(`keeps the lease through a single transient failure well inside the TTL (${t.description})`, async () => {
        const okT = (last: string): Resp => ok(last, { ttl_seconds: t.ttlSeconds });
        const clock = new ManualClock();
        const { api, sentAt } = scriptedApi([okT('a'), apiError(503), okT('b')], okT('c'), clock);
        const l = defaultTimingLease(api, clock);
        const t0 = clock.now();
        l.start();
        await clock.advance(60_000);
        expect(l.signal.aborted).toBe(false);
        expect(sentAt.slice(0, 4).map((x) => x - t0)).toEqual(t.sentAt);
        await l.release();
        expect(l.reason).toBe('done');
      });
    }

    it('uses the default TTL until the server has reported one', async () => {
      const clock = new ManualClock();
      const { api } = scriptedApi([], 'hang', clock);
      const l = defaultTimingLease(api, clock);
      l.start();
      await clock.advance(89_999);
      expect(l.signal.aborted).toBe(false);
      await clock.advance(1);
      expect(l.reason).toBe('assumed_lost');
    });

    it('keeps the first reason: a lease released before the deadline stays done and leaves no timer', async () => {
      const clock = new ManualClock();
      const { api } = scriptedApi([ok10('a')], 'hang', clock);
      const l = defaultTimingLease(api, clock);
      l.start();
      await clock.advance(7_000);
      await l.release();
      expect(clock.pendingTimers).toBe(0);
      await clock.advance(20_000);
      expect(l.reason).toBe('done');
    });
  });
});
