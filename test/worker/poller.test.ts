// Pins the poll loop: back-to-back long polls with the environment key and Anthropic-Worker-ID
// (block_ms=999), an item enqueued while idle claimed within about a second, transient failures
// retried with growing jittered backoff (pollFailed events) waited out on the worker's clock, a
// permanent 4xx ending run() with a RemoteApiError, and run() refusing to start without an
// environment id or key.
import Anthropic from '@anthropic-ai/sdk';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, RemoteApiError } from '../../src/errors.js';
import { ManualClock } from '../../src/internal/manual-clock.js';
import { harness, waitFor, type Harness } from './helpers.js';

describe('EnvironmentWorker.run polling', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('claims an item enqueued while idle within about a second, polling with the worker id', async () => {
    const worker = h.worker({ workerId: 'worker-under-test' });
    let polls = 0;
    worker.on('polled', () => polls++);
    const claimedAt: number[] = [];
    worker.on('workClaimed', () => claimedAt.push(Date.now()));
    const running = worker.run();
    await waitFor(() => polls >= 2, 5_000, 'two empty polls');
    expect(worker.lastPollOkAt).toBeTypeOf('number');
    await new Promise((r) => setTimeout(r, 300));
    const enqueuedAt = Date.now();
    const { sessionId } = await h.emu.createSession({ script: [] });
    await h.emu.waitForSession(sessionId, { timeoutMs: 10_000 });
    await worker.close();
    await running;

    expect(claimedAt).toHaveLength(1);
    expect(claimedAt[0]! - enqueuedAt).toBeLessThan(1_500);
    const pollReqs = h.emu.requests.filter((r) => r.route.endsWith('/work/poll'));
    expect(pollReqs.every((r) => r.credential === 'environment_key')).toBe(true);
    expect(pollReqs.every((r) => r.query['block_ms'] === '999')).toBe(true);
    expect(pollReqs.every((r) => r.workerId === 'worker-under-test')).toBe(true);
    // One poll in flight at a time.
    const sorted = [...pollReqs].sort((a, b) => a.startedAt - b.startedAt);
    for (let i = 1; i < sorted.length; i++)
      expect(sorted[i]!.startedAt).toBeGreaterThanOrEqual(sorted[i - 1]!.startedAt + sorted[i - 1]!.ms - 5);
  });

  it('backs off on transient failures, each wait on the worker clock, and recovers', async () => {
    h.emu.faults.add({ route: /work\/poll$/, status: 503, times: 3 });
    // No SDK-level retries, so each fault is one failed poll the worker sees.
    const client = new Anthropic({ apiKey: 'sk-ant-api-operator-key', baseURL: h.emu.baseURL, logLevel: 'off', maxRetries: 0 });
    const clock = new ManualClock();
    const worker = h.worker({ client, clock });
    const failures: number[] = [];
    worker.on('pollFailed', (e) => failures.push(e.retryInMs));
    const { sessionId } = await h.emu.createSession({ script: [] });
    const running = worker.run();
    for (let n = 1; n <= 3; n++) {
      await waitFor(() => failures.length === n, 10_000, `failed poll ${n}`);
      // The backoff is the only wait pending: the next poll goes out once the clock has moved that far.
      expect(clock.nextDueInMs).toBe(failures[n - 1]);
      await clock.advance(failures[n - 1]!);
    }
    const done = await h.emu.waitForSession(sessionId, { timeoutMs: 20_000 });
    await worker.close();
    await running;

    // 1 s, 2 s, 4 s, each minus at most 25 % jitter.
    expect(failures).toHaveLength(3);
    expect(failures[0]).toBeGreaterThanOrEqual(750);
    expect(failures[0]).toBeLessThanOrEqual(1000);
    expect(failures[1]).toBeGreaterThanOrEqual(1500);
    expect(failures[1]).toBeLessThanOrEqual(2000);
    expect(failures[2]).toBeGreaterThanOrEqual(3000);
    expect(failures[2]).toBeLessThanOrEqual(4000);
    expect(h.emu.requests.filter((r) => r.route.endsWith('/work/poll')).length).toBeGreaterThanOrEqual(4);
    expect(done.workStopped).toBe(true);
  });

  it('ends run() with a RemoteApiError on a permanent 4xx', async () => {
    const worker = h.worker({ environmentKey: 'not-a-real-key' });
    const err = await worker.run().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RemoteApiError);
    expect((err as RemoteApiError).status).toBe(401);
    expect((err as Error).message).not.toContain('not-a-real-key');
  });

  it('refuses to run without an environment id', async () => {
    const worker = h.worker({ environmentId: undefined });
    await expect(worker.run()).rejects.toBeInstanceOf(ConfigError);
  });
});
