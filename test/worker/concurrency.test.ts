// Pins concurrency: with `concurrency: 4` and 8 queued sessions, at most 4 run at once (and 4 do),
// the worker polls only while a slot is free, every session is served and stopped, and two
// sessions attaching the same store never hold its mount path at the same time when their tools run
// in the worker process (`sandbox: 'none'`: they would share the host's one folder). A backlog is
// claimed with several polls in flight, never more than the free slots, also while polls answer
// slowly or fail and an ack fails (that item comes back after the server's reclaim delay).
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mostAtOnce } from '../requests-at-once.js';
import { harness, type Harness } from './helpers.js';

describe('EnvironmentWorker with concurrency: 4', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('serves 8 queued sessions at most 4 at a time, never overlapping on a shared store path', async () => {
    const { emu } = h;
    const shared = await emu.createMemoryStore({ name: 'Shared Notes', memories: { '/a.md': 'A' } });
    const sharedDir = path.join(h.mountRoot, 'shared-notes');
    const sessions: string[] = [];
    for (let i = 0; i < 8; i++) {
      const own = await emu.createMemoryStore({ name: `Own ${i}`, memories: { '/x.md': String(i) } });
      const resources = [{ memoryStoreId: own.id }];
      // Sessions 0 and 1 both attach the shared store, at the same mount path.
      if (i < 2) resources.push({ memoryStoreId: shared.id });
      const { sessionId } = await emu.createSession({
        resources,
        script: [
          { tool: 'read', input: { file_path: path.join(h.mountRoot, `own-${i}`, 'x.md') } },
          { sleepMs: 600 },
          ...(i < 2 ? [{ tool: 'write', input: { file_path: path.join(sharedDir, `from-${i}.md`), content: `s${i}` } }] : []),
        ],
      });
      sessions.push(sessionId);
    }
    // Tools in the worker process: the shared store is one folder at its mount path, held in turn.
    const worker = h.worker({ concurrency: 4, sandbox: 'none' });
    const activeAtStart: number[] = [];
    const activeAtPoll: number[] = [];
    const sharedHolds: Array<{ sessionId: string; kind: 'mounted' | 'unmounted'; at: number }> = [];
    worker.on('sessionStarted', () => activeAtStart.push(worker.activeSessions));
    worker.on('polled', () => activeAtPoll.push(worker.activeSessions));
    worker.on('mounted', (e) => {
      if (e.root === sharedDir) sharedHolds.push({ sessionId: e.sessionId, kind: 'mounted', at: performance.now() });
    });
    worker.on('unmounted', (e) => {
      if (e.root === sharedDir) sharedHolds.push({ sessionId: e.sessionId, kind: 'unmounted', at: performance.now() });
    });
    const running = worker.run();
    const outcomes = await Promise.all(sessions.map((s) => emu.waitForSession(s, { timeoutMs: 40_000 })));
    await worker.close();
    await running;

    expect(outcomes.every((o) => o.status === 'terminated' && o.workStopped)).toBe(true);
    expect(outcomes.every((o) => o.toolResults.every((r) => !r.isError))).toBe(true);
    expect(Math.max(...activeAtStart)).toBe(4);
    expect(activeAtStart.every((n) => n <= 4)).toBe(true);
    expect(activeAtPoll.every((n) => n < 4)).toBe(true);
    expect(worker.metrics()).toMatchObject({ itemsClaimed: 8, itemsCompleted: 8, itemsFailed: 0 });
    expect(emu.memories(shared.id)).toEqual({ '/a.md': 'A', '/from-0.md': 's0', '/from-1.md': 's1' });
    // The shared path was held by one session, released, then held by the other: never both.
    expect(sharedHolds.map((e) => e.kind)).toEqual(['mounted', 'unmounted', 'mounted', 'unmounted']);
    expect(sharedHolds[0]!.sessionId).toBe(sharedHolds[1]!.sessionId);
    expect(sharedHolds[2]!.sessionId).toBe(sharedHolds[3]!.sessionId);
    expect(sharedHolds[0]!.sessionId).not.toBe(sharedHolds[2]!.sessionId);
  });

  describe('when polls answer slowly or fail and an ack fails', () => {
    let hs: Harness;
    beforeEach(async () => {
      hs = await harness({ reclaimOlderThanMs: 300 });
    });
    afterEach(async () => {
      await hs.cleanup();
    });

    it('claims a backlog with parallel polls, never holding more than the free slots', async () => {
      const { emu } = hs;
      const sessions: string[] = [];
      for (let i = 0; i < 10; i++) {
        const { sessionId } = await emu.createSession({ script: [{ sleepMs: 300 }] });
        sessions.push(sessionId);
      }
      emu.faults.add({ route: /\/work\/poll$/, latencyMs: 40 });
      emu.faults.add({ route: /\/work\/poll$/, skip: 3, times: 1, status: 503 });
      emu.faults.add({ route: /\/ack$/, times: 1, status: 500 });
      const worker = hs.worker({ concurrency: 4 });
      const activeAtPoll: number[] = [];
      const running: number[] = [];
      worker.on('polled', () => activeAtPoll.push(worker.activeSessions));
      worker.on('sessionStarted', () => running.push(worker.activeSessions));
      const run = worker.run();
      const outcomes = await Promise.all(sessions.map((s) => emu.waitForSession(s, { timeoutMs: 40_000 })));
      await worker.close();
      await run;

      expect(outcomes.every((o) => o.status === 'terminated' && o.workStopped)).toBe(true);
      expect(worker.metrics()).toMatchObject({ itemsClaimed: 10, itemsCompleted: 10, itemsFailed: 0 });
      const polls = emu.requests.filter((r) => r.route.endsWith('/work/poll'));
      const acks = emu.requests.filter((r) => r.route.endsWith('/ack'));
      expect(acks.filter((r) => r.status === 500)).toHaveLength(1);
      expect(polls.filter((r) => r.status === 503)).toHaveLength(1);
      // Several polls at once while the queue had a backlog, never more than the slots.
      expect(mostAtOnce(polls)).toBeGreaterThan(1);
      expect(mostAtOnce(polls)).toBeLessThanOrEqual(4);
      expect(activeAtPoll.every((n) => n < 4)).toBe(true);
      expect(Math.max(...running)).toBeLessThanOrEqual(4);
    });
  });
});
