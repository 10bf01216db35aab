// Pins the path wait inside one process: a session whose store path is held by another running
// session waits with its lease kept alive (heartbeats continue), mounts once the path is free, and
// when the wait exceeds pathWaitMs fails with an error naming the path and the other session, at
// once and without answering the call its early runner held (the call never ran). The tools run in
// the worker process (`sandbox: 'none'`), where two sessions of a store share its one folder;
// sandboxed sessions each hold their own copy and never wait (per-session-stores.int.test.ts).
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { EnvironmentWorker } from '../../src/worker/environment-worker.js';
import { harness, waitFor, type Harness } from './helpers.js';

describe('two sessions wanting the same mount path', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness({ leaseTtlSeconds: 2 });
  });
  afterEach(async () => {
    await h.cleanup();
  });

  /**
   * The first session is queued alone and the second only once the first holds the path, so which
   * session waits never depends on how fast two items claimed back to back reach the path lock.
   */
  async function twoSessions(worker: EnvironmentWorker, holdMs: number) {
    const { emu } = h;
    const store = await emu.createMemoryStore({ name: 'Shared', memories: { '/a.md': 'A' } });
    const dir = path.join(h.mountRoot, 'shared');
    const first = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [{ tool: 'read', input: { file_path: path.join(dir, 'a.md') } }, { sleepMs: holdMs }],
    });
    const firstMounted = new Promise<void>((resolve) => worker.on('mounted', (e) => e.sessionId === first.sessionId && resolve()));
    const running = worker.run();
    await firstMounted;
    const second = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [{ tool: 'write', input: { file_path: path.join(dir, 'b.md'), content: 'B' } }],
      end: 'idle',
    });
    return { store, first, second, running };
  }

  it('waits with its lease alive, then mounts once the path is free', async () => {
    const { emu } = h;
    const worker = h.worker({ concurrency: 2, sandbox: 'none', pathWaitMs: 20_000, maxIdleMs: 200 });
    const beatsAtMount: number[] = [];
    let secondWorkId: string | undefined;
    worker.on('mounted', (e) => {
      if (e.workId === secondWorkId) beatsAtMount.push(emu.workItem(e.workId).heartbeats);
    });
    const { store, first, second, running } = await twoSessions(worker, 3_000);
    secondWorkId = second.workId;
    await emu.waitForSession(first.sessionId, { timeoutMs: 20_000 });
    const outcome = await new Promise<{ status: string }>((resolve) =>
      worker.on('sessionEnded', (e) => e.sessionId === second.sessionId && resolve(e.outcome)),
    );
    await worker.close();
    await running;

    expect(outcome.status).toBe('completed');
    // Waited ~3 s on a 2 s lease: it had to keep heartbeating to still hold it.
    expect(beatsAtMount[0]).toBeGreaterThanOrEqual(3);
    expect(emu.memories(store.id)).toEqual({ '/a.md': 'A', '/b.md': 'B' });
    emu.archiveSession(second.sessionId);
  });

  it('fails after pathWaitMs naming the path and the session holding it, at once and answering no call', async () => {
    const { emu } = h;
    const worker = h.worker({ concurrency: 2, sandbox: 'none', pathWaitMs: 1_500 });
    const failed: Array<{ workId: string; error: Error; at: number }> = [];
    worker.on('workFailed', (e) => failed.push({ ...e, at: Date.now() }));
    const claimedAt = new Map<string, number>();
    worker.on('workClaimed', (e) => claimedAt.set(e.workId, Date.now()));
    const { store, first, second, running } = await twoSessions(worker, 5_000);
    // The second item's runner opened the stream and holds the agent's call while the path is busy.
    await waitFor(() => failed.length > 0, 20_000, 'the second item to fail');
    const waitedMs = failed[0]!.at - claimedAt.get(second.workId)!;
    await waitFor(() => emu.workItem(second.workId).state === 'stopped', 5_000, 'the second item to be stopped');
    await emu.waitForSession(first.sessionId, { timeoutMs: 20_000 });
    await worker.close();
    await running;

    expect(waitedMs).toBeGreaterThanOrEqual(1_400);
    expect(waitedMs).toBeLessThan(1_500 + 3_000);
    expect(emu.session(second.sessionId).toolResults).toEqual([]);
    expect(emu.memories(store.id)).toEqual({ '/a.md': 'A' });
    expect(failed).toHaveLength(1);
    expect(failed[0]!.workId).toBe(second.workId);
    expect(failed[0]!.error.message).toContain(`${path.join(h.mountRoot, 'shared')} is in use by session ${first.sessionId}`);
    expect(failed[0]!.error.message).toContain('pathWaitMs');
    expect(emu.workItem(second.workId).state).toBe('stopped');
    emu.archiveSession(second.sessionId);
  });
});
