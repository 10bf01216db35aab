/**
 * Pins the emulator's work queue: empty polls answer `null` after holding up to
 * `block_ms` (and `block_ms` > 999 is a 400), a delivered item carries a base64url secret with the
 * sessions token (or none), ack → starting, the heartbeat lease (NO_HEARTBEAT, exact echo,
 * 412 with the server's state), stop (graceful → stopping reported by the heartbeat, force →
 * stopped, 409 once stopped), redelivery of un-acked items, and reclaim of lapsed leases.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { errorBody, expectApiError } from './helpers.js';

let emu: Emulator;
let env: Anthropic;

beforeEach(async () => {
  emu = await startEmulator({ mountRoot: '/nonexistent-mount-root', leaseTtlSeconds: 1, reclaimOlderThanMs: 300 });
  env = emu.client({ apiKey: null, authToken: emu.environmentKey, maxRetries: 0 });
});
afterEach(async () => {
  await emu.close();
});

function decodeSecret(secret: string): unknown {
  return JSON.parse(Buffer.from(secret, 'base64url').toString('utf8'));
}

describe('poll', () => {
  it('answers null right away without block_ms, and after about block_ms with it', async () => {
    // The client's first request also sets up its connection: not part of what is timed.
    expect(await env.beta.environments.work.poll(emu.environmentId)).toBeNull();
    let t = Date.now();
    expect(await env.beta.environments.work.poll(emu.environmentId)).toBeNull();
    // Well under the 400 ms wait below, with room for a loaded machine.
    expect(Date.now() - t).toBeLessThan(300);
    t = Date.now();
    expect(await env.beta.environments.work.poll(emu.environmentId, { block_ms: 400 })).toBeNull();
    const waited = Date.now() - t;
    expect(waited).toBeGreaterThanOrEqual(380);
    expect(waited).toBeLessThan(900);
  });

  it('refuses block_ms above 999 with 400', async () => {
    await expectApiError(env.beta.environments.work.poll(emu.environmentId, { block_ms: 1000 }), 400, 'invalid_request_error');
  });

  it('returns an item queued while it is waiting, before block_ms runs out', async () => {
    const t = Date.now();
    const polled = env.beta.environments.work.poll(emu.environmentId, { block_ms: 999 });
    setTimeout(() => void emu.createSession(), 100);
    const item = await polled;
    expect(item?.data.type).toBe('session');
    expect(Date.now() - t).toBeLessThan(800);
  });

  it('delivers the item with a base64url secret holding its sessions token', async () => {
    const { sessionId, workId } = await emu.createSession();
    const item = await env.beta.environments.work.poll(emu.environmentId);
    expect(item).toMatchObject({
      id: workId,
      type: 'work',
      environment_id: emu.environmentId,
      state: 'queued',
      data: { type: 'session', id: sessionId },
    });
    expect(decodeSecret(item!.secret!)).toEqual({ sessions_token: emu.sessionsToken(workId) });
    expect(emu.sessionsToken(workId)).toMatch(/^sk-ant-req-/);
  });

  it('delivers secret null for a session created with secret: false', async () => {
    await emu.createSession({ secret: false });
    const item = await env.beta.environments.work.poll(emu.environmentId);
    expect(item?.secret).toBeNull();
  });

  it('redelivers an un-acked item after reclaim_older_than_ms, not before', async () => {
    const { workId } = await emu.createSession();
    expect((await env.beta.environments.work.poll(emu.environmentId))?.id).toBe(workId);
    expect(await env.beta.environments.work.poll(emu.environmentId)).toBeNull();
    const again = await env.beta.environments.work.poll(emu.environmentId, { block_ms: 999 });
    expect(again?.id).toBe(workId);
    expect(emu.workItem(workId).deliveries).toBe(2);
  });

  it('honours a per-poll reclaim_older_than_ms', async () => {
    const { workId } = await emu.createSession();
    await env.beta.environments.work.poll(emu.environmentId);
    await new Promise((r) => setTimeout(r, 60));
    const again = await env.beta.environments.work.poll(emu.environmentId, { reclaim_older_than_ms: 50 });
    expect(again?.id).toBe(workId);
  });
});

describe('ack and heartbeat', () => {
  async function claim(): Promise<{ workId: string; token: Anthropic }> {
    const { workId } = await emu.createSession();
    const item = await env.beta.environments.work.poll(emu.environmentId);
    const acked = await env.beta.environments.work.ack(item!.id, { environment_id: emu.environmentId });
    expect(acked.state).toBe('starting');
    expect(acked.secret).toBeNull();
    return { workId, token: emu.sessionClient(workId, { maxRetries: 0 }) };
  }

  it('claims the lease with NO_HEARTBEAT, then accepts the exact echo of last_heartbeat', async () => {
    const { workId, token } = await claim();
    const first = await token.beta.environments.work.heartbeat(workId, {
      environment_id: emu.environmentId,
      expected_last_heartbeat: 'NO_HEARTBEAT',
    });
    expect(first).toMatchObject({ type: 'work_heartbeat', ttl_seconds: 1, state: 'active', lease_extended: true });
    const second = await token.beta.environments.work.heartbeat(workId, {
      environment_id: emu.environmentId,
      expected_last_heartbeat: first.last_heartbeat,
    });
    expect(second.last_heartbeat).not.toBe(first.last_heartbeat);
    expect(emu.workItem(workId)).toMatchObject({ state: 'active', heartbeats: 2 });
  });

  it('answers 412 heartbeat_precondition_failed with the server state when the echo is stale', async () => {
    const { workId, token } = await claim();
    const first = await token.beta.environments.work.heartbeat(workId, {
      environment_id: emu.environmentId,
      expected_last_heartbeat: 'NO_HEARTBEAT',
    });
    await token.beta.environments.work.heartbeat(workId, {
      environment_id: emu.environmentId,
      expected_last_heartbeat: first.last_heartbeat,
    });
    const err = await expectApiError(
      token.beta.environments.work.heartbeat(workId, { environment_id: emu.environmentId, expected_last_heartbeat: first.last_heartbeat }),
      412,
    );
    expect(err.constructor.name).toBe('BetaHeartbeatPreconditionFailedError');
    expect(errorBody(err)['details']).toMatchObject({
      error_code: 'heartbeat_precondition_failed',
      current_state: { state: 'active', lease_extended: false, ttl_seconds: 1 },
    });
  });

  it('answers 412 to a second NO_HEARTBEAT claim', async () => {
    const { workId, token } = await claim();
    await token.beta.environments.work.heartbeat(workId, { environment_id: emu.environmentId, expected_last_heartbeat: 'NO_HEARTBEAT' });
    await expectApiError(
      token.beta.environments.work.heartbeat(workId, { environment_id: emu.environmentId, expected_last_heartbeat: 'NO_HEARTBEAT' }),
      412,
    );
  });

  it('reclaims a lapsed lease: the item is delivered again and the old holder gets 412', async () => {
    const { workId, token } = await claim();
    const first = await token.beta.environments.work.heartbeat(workId, {
      environment_id: emu.environmentId,
      expected_last_heartbeat: 'NO_HEARTBEAT',
    });
    await new Promise((r) => setTimeout(r, 1_100));
    const again = await env.beta.environments.work.poll(emu.environmentId);
    expect(again?.id).toBe(workId);
    await expectApiError(
      token.beta.environments.work.heartbeat(workId, { environment_id: emu.environmentId, expected_last_heartbeat: first.last_heartbeat }),
      412,
    );
  });

  it('accepts the sessions token in the secret of a healthcheck item for its heartbeat and stop', async () => {
    const workId = emu.enqueue({ type: 'healthcheck', secret: true });
    const item = await env.beta.environments.work.poll(emu.environmentId);
    expect(item).toMatchObject({ id: workId, data: { type: 'healthcheck' } });
    const { sessions_token } = decodeSecret(item!.secret!) as { sessions_token: string };
    const token = emu.client({ apiKey: null, authToken: sessions_token, maxRetries: 0 });
    await env.beta.environments.work.ack(workId, { environment_id: emu.environmentId });
    const beat = await token.beta.environments.work.heartbeat(workId, {
      environment_id: emu.environmentId,
      expected_last_heartbeat: 'NO_HEARTBEAT',
    });
    expect(beat.state).toBe('active');
    const stopped = await token.beta.environments.work.stop(workId, { environment_id: emu.environmentId, force: true });
    expect(stopped.state).toBe('stopped');
    expect(emu.requests.filter((r) => r.path.includes(workId) && r.credential === 'sessions_token').map((r) => r.status)).toEqual([
      200, 200,
    ]);
  });

  it('accepts heartbeats with the environment key as well', async () => {
    const { workId } = await claim();
    const beat = await env.beta.environments.work.heartbeat(workId, {
      environment_id: emu.environmentId,
      expected_last_heartbeat: 'NO_HEARTBEAT',
    });
    expect(beat.lease_extended).toBe(true);
  });
});

describe('stop', () => {
  it('graceful stop is reported by the next heartbeat as stopping; force makes it stopped', async () => {
    const { workId } = await emu.createSession();
    await env.beta.environments.work.poll(emu.environmentId);
    await env.beta.environments.work.ack(workId, { environment_id: emu.environmentId });
    const token = emu.sessionClient(workId, { maxRetries: 0 });
    const beat = await token.beta.environments.work.heartbeat(workId, {
      environment_id: emu.environmentId,
      expected_last_heartbeat: 'NO_HEARTBEAT',
    });
    const stopping = await emu.client({ maxRetries: 0 }).beta.environments.work.stop(workId, { environment_id: emu.environmentId });
    expect(stopping.state).toBe('stopping');
    const told = await token.beta.environments.work.heartbeat(workId, {
      environment_id: emu.environmentId,
      expected_last_heartbeat: beat.last_heartbeat,
    });
    expect(told.state).toBe('stopping');
    const stopped = await token.beta.environments.work.stop(workId, { environment_id: emu.environmentId, force: true });
    expect(stopped.state).toBe('stopped');
    expect(stopped.stopped_at).not.toBeNull();
    const after = await token.beta.environments.work.heartbeat(workId, {
      environment_id: emu.environmentId,
      expected_last_heartbeat: 'whatever',
    });
    expect(after).toMatchObject({ state: 'stopped', lease_extended: false });
  });

  it('answers the beats of a stopping item with lease_extended: false (the SDK 1.16 shutdown signal), extends no lease, and stops the item once its lease lapsed', async () => {
    const { workId } = await emu.createSession();
    await env.beta.environments.work.poll(emu.environmentId);
    await env.beta.environments.work.ack(workId, { environment_id: emu.environmentId });
    const token = emu.sessionClient(workId, { maxRetries: 0 });
    let last = (
      await token.beta.environments.work.heartbeat(workId, { environment_id: emu.environmentId, expected_last_heartbeat: 'NO_HEARTBEAT' })
    ).last_heartbeat;
    emu.stopWork(workId);
    // Beats within the 1 s lease say stop and leave the item stopping; no other worker gets it.
    const beat = await token.beta.environments.work.heartbeat(workId, { environment_id: emu.environmentId, expected_last_heartbeat: last });
    expect(beat).toMatchObject({ state: 'stopping', lease_extended: false, last_heartbeat: last });
    expect(await env.beta.environments.work.poll(emu.environmentId)).toBeNull();
    expect(emu.workItem(workId).state).toBe('stopping');
    // A holder that keeps beating does not keep the lease: once it lapses, a poll completes the stop.
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 400));
      const again = await token.beta.environments.work.heartbeat(workId, {
        environment_id: emu.environmentId,
        expected_last_heartbeat: last,
      });
      expect(again.lease_extended).toBe(false);
      last = again.last_heartbeat;
    }
    expect(await env.beta.environments.work.poll(emu.environmentId)).toBeNull();
    expect(emu.workItem(workId).state).toBe('stopped');
  });

  it('answers 409 with x-should-retry false once stopped, so the SDK does not retry', async () => {
    const { workId } = await emu.createSession();
    const client = emu.client(); // default retries: the header must stop them
    await client.beta.environments.work.stop(workId, { environment_id: emu.environmentId, force: true });
    const before = emu.requests.length;
    const err = await expectApiError(
      client.beta.environments.work.stop(workId, { environment_id: emu.environmentId, force: true }),
      409,
      'conflict_error',
    );
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(emu.requests.length - before).toBe(1);
  });

  it('stops an item nobody acknowledged at once, and retrieve shows it', async () => {
    const { workId } = await emu.createSession();
    const client = emu.client({ maxRetries: 0 });
    await client.beta.environments.work.stop(workId, { environment_id: emu.environmentId });
    const item = await client.beta.environments.work.retrieve(workId, { environment_id: emu.environmentId });
    expect(item.state).toBe('stopped');
    expect(await env.beta.environments.work.poll(emu.environmentId)).toBeNull();
  });

  it('answers 404 for a work item of another environment', async () => {
    const { workId } = await emu.createSession();
    const other = emu.createEnvironment();
    await expectApiError(
      emu.client({ maxRetries: 0 }).beta.environments.work.retrieve(workId, { environment_id: other.id }),
      404,
      'not_found_error',
    );
  });
});
