// Pins the claim by the first heartbeat, as the official 1.16 worker does: an item's first heartbeat
// is answered before its session is read, its skills or memories are downloaded or any tool runs.
// A 412 on that beat (the lease is someone else's): the item is not served and not stopped. A
// permanent refusal (401): not served, not stopped, and the item fails with the heartbeat's error.
// A first answer that does not extend the lease (the item is stopping): not served, and stopped.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ItemOutcome } from '../../src/worker/events.js';
import { claimNext, harness, rejectionOf, stopRequests, type Harness } from './helpers.js';

const HEARTBEAT = /^POST \/v1\/environments\/[^/]+\/work\/[^/]+\/heartbeat$/;

describe('an item is claimed by its first heartbeat before anything else', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  /** A session with a skill, a memory store and one tool call: every kind of request an item makes. */
  async function fullSession() {
    const { emu } = h;
    const store = await emu.createMemoryStore({ name: 'notes', memories: { '/a.md': 'A' } });
    return emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      skills: [{ name: 'greeter', files: { 'SKILL.md': '---\nname: greeter\ndescription: says hi\n---\nhi' } }],
      script: [{ tool: 'bash', input: { command: 'echo served' } }],
    });
  }

  /** Serve the next item through handleItem(), so one delivery is all the worker sees. */
  async function serveOnce(): Promise<{ outcome: ItemOutcome; workId: string; sessionId: string }> {
    const claim = await claimNext(h);
    const worker = h.worker();
    const outcome = await worker.handleItem({
      workId: claim.workId,
      environmentId: claim.environmentId,
      sessionId: claim.sessionId,
      ...(claim.secret ? { workSecret: claim.secret } : {}),
    });
    return { outcome, workId: claim.workId, sessionId: claim.sessionId };
  }

  /** Every request made with the item's token (the test's only item) other than its heartbeats and its stop. */
  function itemRequests() {
    return h.emu.requests.filter(
      (r) => r.credential === 'sessions_token' && !HEARTBEAT.test(`${r.method} ${r.path}`) && !r.route.endsWith('/stop'),
    );
  }

  it('answers the first heartbeat before the session read, the skill and memory downloads and any tool', async () => {
    const { emu } = h;
    const { sessionId } = await fullSession();
    const { outcome, workId } = await serveOnce();
    expect(outcome.status).toBe('completed');
    expect(emu.session(sessionId).toolResults.map((r) => r.text.trim())).toEqual(['served']);

    const beats = emu.requests.filter((r) => HEARTBEAT.test(`${r.method} ${r.path}`) && r.path.includes(workId));
    const firstBeatAnswered = Math.min(...beats.map((r) => r.startedAt + r.ms));
    const sessionRead = emu.requests.filter((r) => r.route === 'GET /v1/sessions/:id' && r.path.includes(sessionId));
    const others = itemRequests();
    expect(sessionRead.length).toBeGreaterThan(0);
    expect(others.some((r) => r.route.includes('/skills/'))).toBe(true);
    expect(others.some((r) => r.route.includes('/memories'))).toBe(true);
    expect(others.some((r) => r.route === 'POST /v1/sessions/:id/events')).toBe(true);
    // Every other request of the item arrived after the first beat was answered (Date.now() at arrival).
    expect(Math.min(...sessionRead.map((r) => r.startedAt))).toBeGreaterThanOrEqual(firstBeatAnswered);
    expect(Math.min(...others.map((r) => r.startedAt))).toBeGreaterThanOrEqual(firstBeatAnswered);
  });

  it('a 412 on the first heartbeat: nothing read or run, the item not stopped, the outcome lease_lost', async () => {
    const { emu } = h;
    const { sessionId } = await fullSession();
    emu.faults.add({ route: HEARTBEAT, leaseLost: true, times: 1 });
    const { outcome, workId } = await serveOnce();

    expect(outcome.status).toBe('lease_lost');
    expect(emu.requests.filter((r) => r.route === 'GET /v1/sessions/:id')).toEqual([]);
    expect(itemRequests()).toEqual([]);
    expect(stopRequests(h, workId)).toEqual([]);
    expect(emu.session(sessionId).toolResults).toEqual([]);
  });

  it('a 401 on the first heartbeat: nothing read or run, the item not stopped, the outcome failed with the refusal', async () => {
    const { emu } = h;
    const { sessionId } = await fullSession();
    emu.faults.add({ route: HEARTBEAT, status: 401, errorType: 'authentication_error', message: 'token revoked', times: 1 });
    const claim = await claimNext(h);
    const workId = claim.workId;
    const failed: ItemOutcome[] = [];
    const worker = h.worker();
    worker.on('workFailed', (e) =>
      failed.push({ workId: e.workId, sessionId: e.sessionId, status: 'failed', error: e.error, durationMs: 0 }),
    );
    // handleItem() throws a failed item's error, as the official worker does.
    const thrown = await rejectionOf(
      worker.handleItem({ workId, environmentId: claim.environmentId, sessionId, workSecret: claim.secret! }),
    );

    expect(String(thrown)).toContain('token revoked');
    expect(failed.map((f) => f.error?.message)).toEqual([expect.stringContaining('token revoked')]);
    expect(emu.requests.filter((r) => r.route === 'GET /v1/sessions/:id')).toEqual([]);
    expect(itemRequests()).toEqual([]);
    expect(stopRequests(h, workId)).toEqual([]);
    expect(h.capture.lines.some((l) => l.msg.includes('the first heartbeat was refused'))).toBe(true);
  });

  it('a first answer that does not extend the lease (stopping): nothing read or run, and the item is stopped', async () => {
    const { emu } = h;
    const { sessionId } = await fullSession();
    emu.faults.add({ route: HEARTBEAT, stopWork: true, times: 1 });
    const { outcome, workId } = await serveOnce();

    expect(outcome.status).toBe('stopped_by_server');
    expect(emu.requests.filter((r) => r.route === 'GET /v1/sessions/:id')).toEqual([]);
    expect(itemRequests()).toEqual([]);
    expect(stopRequests(h, workId).length).toBe(1);
    expect(emu.workItem(workId).state).toBe('stopped');
  });
});
