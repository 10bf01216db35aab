// Pins the lease heartbeat: NO_HEARTBEAT first then an exact echo of last_heartbeat, the interval
// from the server TTL (max(floor, min(ttl/2, cap))), and each ending — 412 lost, stop verdicts,
// lease_extended false, permanent 4xx rejected, no success within the TTL assumed lost, hung beats
// cut off — with the first reason winning. Uses a plain-object heartbeat API and small timings; the
// deadline tests drive fake timers and an injected clock with the real default intervals.
import { APIError, APIConnectionError } from '@anthropic-ai/sdk';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { heartbeatIntervalMs, Lease, NO_HEARTBEAT, type HeartbeatApi } from '../../src/worker/lease.js';

const logger = pino({ level: 'silent' });
type Resp = Awaited<ReturnType<HeartbeatApi['heartbeat']>>;
type Step = Resp | Error | 'hang' | { afterMs: number; then: Resp };

function scriptedApi(steps: Step[], fallback: Step) {
  const sent: string[] = [];
  const sentAt: number[] = [];
  let i = 0;
  const api: HeartbeatApi = {
    heartbeat: (_workId, params, opts) => {
      sent.push(params.expected_last_heartbeat);
      sentAt.push(Date.now());
      const step = i < steps.length ? steps[i++]! : fallback;
      if (step === 'hang') {
        return new Promise((_, reject) => opts.signal.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' }))));
      }
      if ('afterMs' in step) return new Promise((r) => setTimeout(() => r(step.then), step.afterMs));
      return step instanceof Error ? Promise.reject(step) : Promise.resolve(step);
    },
  };
  return { api, sent, sentAt };
}

const ok = (last: string, over: Partial<Resp> = {}): Resp => ({ last_heartbeat: last, ttl_seconds: 0, state: 'active', lease_extended: true, ...over });
const apiError = (status: number): APIError => new APIError(status, { type: 'error', error: { type: 'x', message: 'm' } }, 'm', new Headers());
const timing = { defaultIntervalMs: 20, defaultTtlMs: 200, floorMs: 10 };

function lease(api: HeartbeatApi): Lease {
  return new Lease({ api, workId: 'work_1', environmentId: 'env_1', logger, timing });
}

async function ended(l: Lease, withinMs = 2000): Promise<void> {
  await Promise.race([
    new Promise<void>((r) => (l.signal.aborted ? r() : l.signal.addEventListener('abort', () => r()))),
    new Promise<void>((_, rej) => setTimeout(() => rej(new Error('lease did not end')), withinMs)),
  ]);
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
    const { api, sent } = scriptedApi([ok('2026-01-01T00:00:00.000001Z'), ok('t2'), ok('t3')], ok('t4'));
    const l = lease(api);
    l.start();
    // Wait for the fourth beat rather than a fixed time, so a loaded machine cannot cut it short.
    const deadline = Date.now() + 5_000;
    while (sent.length < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    await l.release();
    expect(sent.slice(0, 4)).toEqual([NO_HEARTBEAT, '2026-01-01T00:00:00.000001Z', 't2', 't3']);
    expect(l.reason).toBe('done');
    expect(l.lost).toBe(false);
  });

  it('follows the server TTL', async () => {
    const { api } = scriptedApi([ok('a', { ttl_seconds: 3 })], ok('b'));
    const ttls: number[] = [];
    const l = new Lease({ api, workId: 'w', environmentId: 'e', logger, timing, onTtl: (t) => ttls.push(t) });
    l.start();
    await new Promise((r) => setTimeout(r, 10));
    expect(l.ttlMs).toBe(3000);
    expect(ttls).toEqual([3000]);
    await l.release();
  });

  describe('when the heartbeat answers 412', () => {
    it('ends as lease_lost, which means the item must not be stopped', async () => {
      const { api } = scriptedApi([ok('a'), apiError(412)], ok('x'));
      const l = lease(api);
      l.start();
      await ended(l);
      expect(l.reason).toBe('lease_lost');
      expect(l.lost).toBe(true);
    });
  });

  const verdicts = [
    { description: 'state stopping ends it as a server stop', resp: ok('a', { state: 'stopping' }) },
    { description: 'state stopped ends it as a server stop', resp: ok('a', { state: 'stopped' }) },
    { description: 'lease_extended false ends it as a server stop', resp: ok('a', { lease_extended: false }) },
  ];
  for (const v of verdicts) {
    it(v.description, async () => {
      const { api } = scriptedApi([v.resp], ok('x'));
      const l = lease(api);
      l.start();
      await ended(l);
      expect(l.reason).toBe('server_stop');
      expect(l.lost).toBe(false);
    });
  }

  it('ends as rejected on a permanent 4xx other than 412', async () => {
    const { api } = scriptedApi([apiError(404)], ok('x'));
    const l = lease(api);
    l.start();
    await ended(l);
    expect(l.reason).toBe('rejected');
    expect(l.lost).toBe(false);
    expect((l.rejection as APIError).status).toBe(404);
  });

  it('keeps going through transient failures that stay within the TTL', async () => {
    const { api, sent } = scriptedApi([ok('a'), apiError(503), new APIConnectionError({ message: 'reset' }), ok('b')], ok('c'));
    const l = lease(api);
    l.start();
    await new Promise((r) => setTimeout(r, 120));
    expect(l.signal.aborted).toBe(false);
    await l.release();
    // A failed beat does not advance the echoed value.
    expect(sent.slice(0, 4)).toEqual([NO_HEARTBEAT, 'a', 'a', 'a']);
  });

  it('assumes the lease lost when no beat succeeds within the TTL', async () => {
    const { api } = scriptedApi([], apiError(503));
    const l = lease(api);
    const t0 = Date.now();
    l.start();
    await ended(l);
    expect(l.reason).toBe('assumed_lost');
    expect(l.lost).toBe(true);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
  });

  it('cuts off a hung beat so the TTL check still fires', async () => {
    const { api } = scriptedApi([], 'hang');
    const l = lease(api);
    l.start();
    await ended(l);
    expect(l.reason).toBe('assumed_lost');
  });

  it('keeps the first reason when it ends twice', async () => {
    const { api } = scriptedApi([apiError(412)], ok('x'));
    const l = lease(api);
    l.start();
    await ended(l);
    await l.release();
    expect(l.reason).toBe('lease_lost');
  });

  // Server TTL 10 s → beats every 5 s, each cut off after 5 s. The lease must end the moment 10 s
  // have passed since the last successful beat, not at the next failed beat (up to 2× the TTL).
  describe('the TTL deadline', () => {
    beforeEach(() => {
      vi.useFakeTimers();
    });
    afterEach(() => {
      vi.useRealTimers();
    });

    function realTimingLease(api: HeartbeatApi): Lease {
      return new Lease({ api, workId: 'w', environmentId: 'e', logger, clock: { now: () => Date.now() } });
    }
    const ok10 = (last: string): Resp => ok(last, { ttl_seconds: 10 });

    const failures = [
      { description: 'every later beat hangs', step: 'hang' as const },
      { description: 'every later beat answers 503', step: apiError(503) },
    ];
    for (const f of failures) {
      it(`ends as assumed_lost exactly one TTL after the last success when ${f.description}`, async () => {
        const { api } = scriptedApi([ok10('a')], f.step);
        const l = realTimingLease(api);
        l.start();
        await vi.advanceTimersByTimeAsync(9_999);
        expect(l.signal.aborted).toBe(false);
        await vi.advanceTimersByTimeAsync(1);
        expect(l.signal.aborted).toBe(true);
        expect(l.reason).toBe('assumed_lost');
        expect(l.lost).toBe(true);
        await l.release();
        expect(vi.getTimerCount()).toBe(0);
      });
    }

    it('keeps the lease when a beat succeeds just before the deadline, and re-arms it from that success', async () => {
      // Beat at 5 s answers after 4.99 s (inside its 5 s cut-off): success at 9.99 s.
      const { api } = scriptedApi([ok10('a'), { afterMs: 4_990, then: ok10('b') }], 'hang');
      const l = realTimingLease(api);
      l.start();
      await vi.advanceTimersByTimeAsync(10_000);
      expect(l.signal.aborted).toBe(false);
      expect(l.beats).toBe(2);
      await vi.advanceTimersByTimeAsync(9_989); // 19.989 s: 9.999 s since the last success
      expect(l.signal.aborted).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
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
        const { api, sentAt } = scriptedApi([okT('a'), apiError(503), okT('b')], okT('c'));
        const l = realTimingLease(api);
        const t0 = Date.now();
        l.start();
        await vi.advanceTimersByTimeAsync(60_000);
        expect(l.signal.aborted).toBe(false);
        expect(sentAt.slice(0, 4).map((x) => x - t0)).toEqual(t.sentAt);
        await l.release();
        expect(l.reason).toBe('done');
      });
    }

    it('uses the default TTL until the server has reported one', async () => {
      const { api } = scriptedApi([], 'hang');
      const l = realTimingLease(api);
      l.start();
      await vi.advanceTimersByTimeAsync(89_999);
      expect(l.signal.aborted).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      expect(l.reason).toBe('assumed_lost');
    });

    it('keeps the first reason: a lease released before the deadline stays done and leaves no timer', async () => {
      const { api } = scriptedApi([ok10('a')], 'hang');
      const l = realTimingLease(api);
      l.start();
      await vi.advanceTimersByTimeAsync(7_000);
      await l.release();
      expect(vi.getTimerCount()).toBe(0);
      await vi.advanceTimersByTimeAsync(20_000);
      expect(l.reason).toBe('done');
    });
  });
});
