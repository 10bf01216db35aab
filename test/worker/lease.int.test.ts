// Pins the lease verdicts end to end: a 412 mid-session aborts the session and leaves the item to
// its new owner (no stop sent, leaseLost emitted, folders still removed after the flush); a
// `stopping` heartbeat ends the session and the item is force-stopped; the lease TTL the heartbeat
// reports is the runner's tool-result send retry window (as the official worker sets it: up to SDK
// 1.15 a failing post is given up one TTL after its first attempt; from 1.16 it is retried while
// the lease holds and given up at once when the runner stops past that window); with no
// successful heartbeat for a whole TTL the session is aborted at the TTL, not at the next failed
// beat, and the item is left to the server (not stopped): on the worker's manual clock, to the
// millisecond, and once on the wall clock end to end.
import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { SessionToolRunner } from '@anthropic-ai/sdk/lib/tools/SessionToolRunner';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RemoteApiError, WorkItemFailedError } from '../../src/errors.js';
import { ManualClock } from '../../src/internal/manual-clock.js';
import type { FaultRule } from '../../src/testing/index.js';
import { claimNext, exists, harness, stopRequests, waitFor, type Harness, rejectionOf } from './helpers.js';

const HEARTBEAT = /\/heartbeat$/;

describe('when no heartbeat succeeds for a whole lease TTL (wall clock)', () => {
  // `faults` are added in turn, each once the one before has retired (rules firing on one request combine).
  const rows: Array<{ description: string; ttlSeconds: number; faults: FaultRule[] }> = [
    // One quick failure, then hangs: the next failed beat would only come at TTL + 2 s.
    {
      description: 'one heartbeat answers 503 at once, then every one hangs (TTL 4 s)',
      ttlSeconds: 4,
      faults: [
        { route: HEARTBEAT, status: 503, shouldRetry: false, times: 1 },
        { route: HEARTBEAT, hang: true },
      ],
    },
  ];
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.cleanup();
    h = undefined;
  });

  for (const row of rows) {
    it(`aborts the session within the TTL of the last success, does not stop the item and removes the folder: ${row.description}`, async () => {
      h = await harness({ leaseTtlSeconds: row.ttlSeconds });
      const { emu, capture } = h;
      const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } });
      const dir = path.join(h.mountRoot, 'notes');
      const { sessionId } = await emu.createSession({
        resources: [{ memoryStoreId: store.id }],
        script: [
          { tool: 'write', input: { file_path: path.join(dir, 'b.md'), content: 'B' } },
          {
            console: async (e) => {
              for (const f of row.faults) {
                const added = e.faults.add(f);
                if (f.times !== undefined) await waitFor(() => !added.active, 10_000, 'the fault to retire');
              }
            },
          },
          { sleepMs: 30_000 },
          { tool: 'read', input: { file_path: path.join(dir, 'a.md') } },
        ],
        end: 'idle',
      });
      const claimed = await claimNext(h);
      const worker = h.worker();
      let lostAt = 0;
      const lost: unknown[] = [];
      worker.on('leaseLost', (e) => {
        lostAt = Date.now();
        lost.push(e);
      });
      const outcome = await worker.handleItem({ ...claimed, workSecret: claimed.secret! });

      const ttlMs = row.ttlSeconds * 1000;
      const beats = emu.requests.filter((r) => HEARTBEAT.test(r.route) && r.status === 200);
      expect(beats.length).toBeGreaterThan(0);
      const lastSuccess = Math.max(...beats.map((r) => r.startedAt + r.ms));
      const assumedLost = capture.lines.find((l) => l.msg === 'no successful heartbeat within the lease TTL; assuming the lease lost');
      expect(assumedLost).toBeDefined();
      const abortedAfterMs = (assumedLost!['time'] as number) - lastSuccess;
      expect(abortedAfterMs).toBeGreaterThanOrEqual(ttlMs - 100);
      expect(abortedAfterMs).toBeLessThan(ttlMs + 1_000);
      expect(lostAt - lastSuccess).toBeLessThan(ttlMs + 3_000);

      expect(outcome.status).toBe('lease_lost');
      await expectLeftToNextOwner(h, { workId: claimed.workId, sessionId, storeId: store.id, dir, lost });
      emu.archiveSession(sessionId);
    });
  }
});

describe('when no heartbeat succeeds for a whole lease TTL (worker clock)', () => {
  const rows: Array<{ description: string; fault: FaultRule }> = [
    { description: 'every heartbeat hangs', fault: { route: HEARTBEAT, hang: true } },
    { description: 'every heartbeat answers 503', fault: { route: HEARTBEAT, status: 503 } },
  ];
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.cleanup();
    h = undefined;
  });

  for (const row of rows) {
    it(`ends the lease exactly one TTL after the last success, leaves the item unstopped and removes the folder: ${row.description}`, async () => {
      h = await harness({ leaseTtlSeconds: 2 });
      const { emu, capture } = h;
      const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } });
      const dir = path.join(h.mountRoot, 'notes');
      let faultIn = false;
      const { sessionId } = await emu.createSession({
        resources: [{ memoryStoreId: store.id }],
        script: [
          { tool: 'write', input: { file_path: path.join(dir, 'b.md'), content: 'B' } },
          {
            console: (e) => {
              e.faults.add(row.fault);
              faultIn = true;
            },
          },
          { sleepMs: 30_000 },
          { tool: 'read', input: { file_path: path.join(dir, 'a.md') } },
        ],
        end: 'idle',
      });
      const claimed = await claimNext(h);
      const clock = new ManualClock();
      const worker = h.worker({ clock });
      const lost: unknown[] = [];
      worker.on('leaseLost', (e) => lost.push(e));
      const outcome = worker.handleItem({ ...claimed, workSecret: claimed.secret! });
      // The first beat succeeded (the next is due at half the 2 s TTL) and every later one fails.
      await waitFor(() => faultIn && clock.nextDueInMs === 1_000, 10_000, 'the first beat and the heartbeat fault');
      const assumedLostLine = (): unknown =>
        capture.lines.find((l) => l.msg === 'no successful heartbeat within the lease TTL; assuming the lease lost');
      await clock.advance(1_999);
      expect(assumedLostLine()).toBeUndefined();
      await clock.advance(1);
      expect(assumedLostLine()).toBeDefined();
      const result = await outcome;

      const assumedLost = assumedLostLine() as Record<string, unknown>;
      expect(assumedLost?.['silent_ms']).toBe(2_000);
      expect(result.status).toBe('lease_lost');
      await expectLeftToNextOwner(h, { workId: claimed.workId, sessionId, storeId: store.id, dir, lost });
      emu.archiveSession(sessionId);
    });
  }
});

describe('the lease of a running session', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness({ leaseTtlSeconds: 2 });
  });
  afterEach(async () => {
    await h.cleanup();
  });

  describe('when a heartbeat answers 412', () => {
    it('aborts the session, flushes the agent write, removes the folder and does not stop the item', async () => {
      const { emu } = h;
      const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } });
      const dir = path.join(h.mountRoot, 'notes');
      let workId = '';
      const { sessionId } = await emu.createSession({
        resources: [{ memoryStoreId: store.id }],
        script: [
          { tool: 'write', input: { file_path: path.join(dir, 'b.md'), content: 'B' } },
          { console: (e) => e.loseLease(workId) },
          { sleepMs: 20_000 },
          { tool: 'read', input: { file_path: path.join(dir, 'a.md') } },
        ],
        end: 'idle',
      });
      const claimed = await claimNext(h);
      workId = claimed.workId;
      const worker = h.worker();
      const lost: unknown[] = [];
      worker.on('leaseLost', (e) => lost.push(e));
      const started = Date.now();
      const outcome = await worker.handleItem({ ...claimed, workSecret: claimed.secret! });

      expect(outcome.status).toBe('lease_lost');
      expect(outcome.error).toBeUndefined();
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(lost).toEqual([{ workId, sessionId, reason: 'lease_lost' }]);
      expect(stopRequests(h, workId)).toEqual([]);
      expect(emu.workItem(workId).stopped).toBe(false);
      expect(emu.memories(store.id)).toEqual({ '/a.md': 'A', '/b.md': 'B' });
      expect(await exists(dir)).toBe(false);
      expect(worker.metrics().leaseLosses).toBe(1);
      emu.archiveSession(sessionId);
    });
  });

  describe('when a heartbeat reports stopping', () => {
    it('ends the session and force-stops the item', async () => {
      const { emu } = h;
      let workId = '';
      const { sessionId } = await emu.createSession({
        script: [
          { tool: 'bash', input: { command: 'echo one' } },
          { console: (e) => e.stopWork(workId) },
          { sleepMs: 20_000 },
          { tool: 'bash', input: { command: 'echo two' } },
        ],
        end: 'idle',
      });
      const claimed = await claimNext(h);
      workId = claimed.workId;
      const worker = h.worker();
      const outcome = await worker.handleItem({ ...claimed, workSecret: claimed.secret! });

      expect(outcome.status).toBe('stopped_by_server');
      expect(stopRequests(h, workId).map((r) => r.body)).toEqual([{ force: true }]);
      expect(emu.workItem(workId).state).toBe('stopped');
      expect(emu.session(sessionId).toolResults.map((r) => r.name)).toEqual(['bash']);
      emu.archiveSession(sessionId);
    });
  });

  describe('when a tool result cannot be posted', () => {
    // The SDK changed here: up to 1.15 the window runs from the first attempt whatever the runner
    // does; from 1.16 it bounds only a runner that is stopping.
    const windowFromFirstAttempt =
      typeof (SessionToolRunner.prototype as { _setSendRetryWindow?: unknown })._setSendRetryWindow === 'function';

    it('gives up retrying after the lease TTL, not after the runner default of 5 minutes', async () => {
      const { emu, capture } = h;
      const client = new Anthropic({
        apiKey: 'sk-ant-api-operator-key',
        baseURL: emu.baseURL,
        logger: capture.logger.child({ component: 'sdk' }),
        logLevel: 'warn',
      });
      const { sessionId } = await emu.createSession({
        script: [{ sleepMs: 300 }, { tool: 'bash', input: { command: 'echo hi' } }],
        end: 'idle',
      });
      const claimed = await claimNext(h);
      const fault = emu.faults.add({ route: new RegExp(`^POST /v1/sessions/${sessionId}/events$`), status: 503, shouldRetry: false });
      const worker = h.worker({ client });
      const running = worker.handleItem({ ...claimed, workSecret: claimed.secret! });
      await waitFor(() => fault.hits > 0, 10_000, 'the first result post');
      const firstPost = Date.now();
      const gaveUp = (): boolean => capture.lines.some((l) => l.msg === 'failed to send tool result');
      if (windowFromFirstAttempt) {
        // TTL 2 s: the runner gives up within a few seconds (5 min without the TTL window).
        await waitFor(gaveUp, 12_000, 'the runner to give up the post');
        expect(Date.now() - firstPost).toBeLessThan(8_000);
        fault.remove();
        await worker.close();
      } else {
        // The lease holds: the session waits on this result, and the post is still retried past the TTL.
        await waitFor(() => fault.hits >= 3 && Date.now() - firstPost > 3_000, 15_000, 'retries past the 2 s TTL');
        expect(gaveUp()).toBe(false);
        // Stopped past the TTL window: given up at once (5 min from the first attempt without it).
        const closing = Date.now();
        await worker.close();
        expect(gaveUp()).toBe(true);
        expect(Date.now() - closing).toBeLessThan(5_000);
        fault.remove();
      }
      await running;
      emu.archiveSession(sessionId);
    });
  });

  describe('when the server rejects a later heartbeat for good (404)', () => {
    it('fails the item with a RemoteApiError naming the heartbeat and its status, and still force-stops it', async () => {
      const { emu } = h;
      const { sessionId } = await emu.createSession({
        script: [{ sleepMs: 5_000 }, { tool: 'bash', input: { command: 'echo hi' } }],
        end: 'idle',
      });
      const claimed = await claimNext(h);
      // The first beat claims the item (a refusal of it leaves an item that was never ours: claim.test.ts).
      emu.faults.add({ route: /\/heartbeat$/, status: 404, errorType: 'not_found_error', message: 'no such work item', skip: 1 });
      const worker = h.worker();
      const err = await rejectionOf(worker.handleItem({ ...claimed, workSecret: claimed.secret! }));

      expect(err).toBeInstanceOf(WorkItemFailedError);
      const cause = (err as WorkItemFailedError).cause;
      expect(cause).toBeInstanceOf(RemoteApiError);
      expect(cause).toMatchObject({ status: 404, retryable: false });
      expect((cause as Error).message).toContain(`heartbeat of work item ${claimed.workId}`);
      expect(stopRequests(h, claimed.workId).map((r) => r.body)).toEqual([{ force: true }]);
      expect(emu.session(sessionId).toolResults).toEqual([]);
      emu.archiveSession(sessionId);
    });
  });
});

/**
 * An item whose lease the worker assumed lost: the loss reported once, no stop sent, the item not
 * stopped, the agent's edits in the store and the folder removed.
 */
async function expectLeftToNextOwner(
  h: Harness,
  end: { workId: string; sessionId: string; storeId: string; dir: string; lost: unknown[] },
): Promise<void> {
  expect(end.lost).toEqual([{ workId: end.workId, sessionId: end.sessionId, reason: 'assumed_lost' }]);
  expect(stopRequests(h, end.workId)).toEqual([]);
  expect(h.emu.workItem(end.workId).stopped).toBe(false);
  expect(h.emu.memories(end.storeId)).toEqual({ '/a.md': 'A', '/b.md': 'B' });
  expect(await exists(end.dir)).toBe(false);
}
