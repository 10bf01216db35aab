// Pins close(): it stops claiming, ends the running session, runs the final sync (the agent's write
// reaches the store), removes the folders and stops the item; it is idempotent; aborting the
// constructor's signal does the same; it stays bounded (finalFlushMs plus a few seconds) even
// when every memory request hangs; and the library never installs a process signal handler.
import { getEventListeners } from 'node:events';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ItemOutcome } from '../../src/worker/environment-worker.js';
import { SESSION_STORES_FOLDER } from '../../src/worker/store-placement.js';
import { claimNext, exists, harness, stopRequests, waitFor, type Harness } from './helpers.js';

describe('EnvironmentWorker.close mid-session', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  async function startLongSession() {
    const store = await h.emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } });
    const dir = path.join(h.mountRoot, 'notes');
    const session = await h.emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [
        { tool: 'write', input: { file_path: path.join(dir, 'late.md'), content: 'written just before close' } },
        { sleepMs: 60_000 },
      ],
      end: 'idle',
    });
    return { store, dir, ...session };
  }

  it('runs the final sync, removes the folders and stops the item', async () => {
    const { emu } = h;
    const { store, dir, sessionId, workId } = await startLongSession();
    const worker = h.worker();
    const outcomes: ItemOutcome[] = [];
    const order: string[] = [];
    worker.on('sessionEnded', (e) => outcomes.push(e.outcome));
    worker.on('closing', () => order.push('closing'));
    worker.on('closed', () => order.push('closed'));
    const running = worker.run();
    await waitFor(() => emu.session(sessionId).toolResults.length === 1, 10_000, 'the write to be answered');
    // Sandboxed: the session's copy of the store is its own folder under the state folder.
    const own = path.join(h.stateDir, SESSION_STORES_FOLDER, sessionId);
    expect((await fsp.readdir(own)).length).toBe(1);
    expect(await exists(dir)).toBe(false);
    const t0 = Date.now();
    const first = worker.close();
    expect(worker.close()).toBe(first);
    expect(worker.closing).toBe(true);
    await first;
    await running;

    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(emu.memories(store.id)).toEqual({ '/a.md': 'A', '/late.md': 'written just before close' });
    expect(await exists(own)).toBe(false);
    expect(stopRequests(h, workId).map((r) => r.body)).toEqual([{ force: true }]);
    expect(emu.workItem(workId).state).toBe('stopped');
    expect(outcomes.map((o) => o.status)).toEqual(['aborted']);
    expect(order).toEqual(['closing', 'closed']);
    // No poll after close started.
    const polls = emu.requests.filter((r) => r.route.endsWith('/work/poll'));
    expect(polls.every((r) => r.startedAt <= t0 + 50)).toBe(true);
    expect(worker.activeSessions).toBe(0);
  });

  it('does the same when the constructor signal aborts', async () => {
    const { emu } = h;
    const { store, dir, sessionId } = await startLongSession();
    const ctrl = new AbortController();
    const worker = h.worker({ signal: ctrl.signal });
    const running = worker.run();
    await waitFor(() => emu.session(sessionId).toolResults.length === 1, 10_000, 'the write to be answered');
    ctrl.abort();
    await running;
    await worker.onIdle();
    expect(worker.closing).toBe(true);
    expect(emu.memories(store.id)['/late.md']).toBe('written just before close');
    expect(await exists(dir)).toBe(false);
  });

  it('resolves within finalFlushMs plus a few seconds when every memory request hangs', async () => {
    const { emu } = h;
    const { sessionId, workId } = await startLongSession();
    const finalFlushMs = 2_000;
    const worker = h.worker({ finalFlushMs });
    const running = worker.run();
    await waitFor(() => emu.session(sessionId).toolResults.length === 1, 10_000, 'the write to be answered');
    emu.faults.add({ route: /memory_stores/, hang: true });
    const t0 = Date.now();
    await worker.close();
    await running;
    const tookMs = Date.now() - t0;

    expect(tookMs).toBeLessThan(finalFlushMs + 4_000);
    expect(emu.workItem(workId).state).toBe('stopped');
    expect(worker.activeSessions).toBe(0);
  });

  it("installs no process signal handler: SIGTERM/SIGINT are the caller's to wire to close()", async () => {
    const { emu } = h;
    const signals = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;
    const counts = (): number[] => signals.map((s) => process.listenerCount(s));
    const before = counts();
    const { sessionId } = await startLongSession();
    const worker = h.worker();
    const running = worker.run();
    await waitFor(() => emu.session(sessionId).toolResults.length === 1, 15_000, 'the first tool result');
    expect(counts()).toEqual(before);
    await worker.close();
    await running;
    expect(counts()).toEqual(before);
  });

  it('keeps no listener on the constructor signal once its work is done (a worker per webhook request does not leak)', async () => {
    const { emu } = h;
    const ctrl = new AbortController();
    // A worker that served one handed-over item and was dropped, never closed.
    const { sessionId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'true' } }] });
    const claimed = await claimNext(h);
    const served = h.worker({ signal: ctrl.signal, environmentId: undefined });
    expect((await served.handleItem({ ...claimed, workSecret: claimed.secret! })).status).toBe('completed');
    await emu.waitForSession(sessionId, { timeoutMs: 10_000 });
    expect(getEventListeners(ctrl.signal, 'abort')).toHaveLength(0);
    // Workers that ran and were closed.
    for (let i = 0; i < 3; i++) {
      const w = h.worker({ signal: ctrl.signal });
      const running = w.run();
      await w.close();
      await running;
    }
    expect(getEventListeners(ctrl.signal, 'abort')).toHaveLength(0);
    // An idle worker still reads an aborted signal as closing.
    const idle = h.worker({ signal: ctrl.signal });
    ctrl.abort();
    expect(idle.closing).toBe(true);
    await idle.run();
  });
});
