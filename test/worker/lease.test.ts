// Pins the lease heartbeat: NO_HEARTBEAT first then an exact echo of last_heartbeat, the interval
// from the server TTL (max(floor, min(ttl/2, cap))), and each ending — 412 lost, stop verdicts,
// lease_extended false, permanent 4xx rejected, no success within the TTL assumed lost, hung beats
// cut off — with the first reason winning. Uses a plain-object heartbeat API and small timings.
import { APIError, APIConnectionError } from '@anthropic-ai/sdk';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { heartbeatIntervalMs, Lease, NO_HEARTBEAT, type HeartbeatApi } from '../../src/worker/lease.js';

const logger = pino({ level: 'silent' });
type Resp = Awaited<ReturnType<HeartbeatApi['heartbeat']>>;
type Step = Resp | Error | 'hang';

function scriptedApi(steps: Step[], fallback: Step) {
  const sent: string[] = [];
  let i = 0;
  const api: HeartbeatApi = {
    heartbeat: (_workId, params, opts) => {
      sent.push(params.expected_last_heartbeat);
      const step = i < steps.length ? steps[i++]! : fallback;
      if (step === 'hang') {
        return new Promise((_, reject) => opts.signal.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' }))));
      }
      return step instanceof Error ? Promise.reject(step) : Promise.resolve(step);
    },
  };
  return { api, sent };
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
    await new Promise((r) => setTimeout(r, 75));
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
});
