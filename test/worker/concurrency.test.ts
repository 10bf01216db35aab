// Pins concurrency: with `concurrency: 4` and 8 queued sessions, at most 4 run at once (and 4 do),
// the worker polls only while a slot is free, every session is served and stopped, and two
// sessions attaching the same store never hold its mount path at the same time.
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
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
    const worker = h.worker({ concurrency: 4 });
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
});
