// Pins that the worker uploads changed memory as soon as the session goes idle, as the official
// 1.16 worker does: an edit made in the last call of a turn is in the store within about a second
// of that call's result (timed from the emulator's request records), with a 30 s sync interval
// and the session left idle, so neither the interval nor the final sync can be what uploaded it.
// The push is push-only: a local deletion in the same turn waits for a later sync. A turn whose
// last call changed nothing sends no write at all.
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Emulator, RequestRecord } from '../../src/testing/index.js';
import { harness, waitFor, type Harness } from './helpers.js';

const WRITE_ROUTES = new Set([
  'POST /v1/memory_stores/:id/memories',
  'POST /v1/memory_stores/:id/memories/:memoryId',
  'PATCH /v1/memory_stores/:id/memories/:memoryId',
  'DELETE /v1/memory_stores/:id/memories/:memoryId',
]);

const endOf = (r: RequestRecord): number => r.startedAt + r.ms;

describe('when the session goes idle after a turn', () => {
  let h: Harness;
  let emu: Emulator;
  beforeEach(async () => {
    h = await harness({ leaseTtlSeconds: 10 });
    emu = h.emu;
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it("the last call's edit lands in the store within a second of its result (30 s sync interval)", async () => {
    const store = await emu.createMemoryStore({ name: 'notes', memories: { '/plan.md': 'v1', '/old.md': 'to be removed' } });
    const root = path.join(h.mountRoot, 'notes');
    const { sessionId } = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [
        { tool: 'bash', input: { command: `rm ${root}/old.md && echo removed` } },
        { tool: 'write', input: { file_path: `${root}/plan.md`, content: 'v2, written in the last call of the turn' } },
      ],
      // Idle long enough that the final sync cannot be what uploads the edit.
      end: { idleMs: 12_000 },
    });
    const worker = h.worker({ memorySyncIntervalMs: 30_000, finalFlushMs: 30_000 });
    const running = worker.run();
    try {
      await waitFor(
        () => emu.memories(store.id)['/plan.md'] === 'v2, written in the last call of the turn',
        10_000,
        'the edit in the store',
      );
      expect(emu.session(sessionId).status).toBe('idle');
      const writes = emu.requests.filter((r) => WRITE_ROUTES.has(r.route) && r.status < 300);
      const results = emu.requests.filter(
        (r) => r.route === 'POST /v1/sessions/:id/events' && JSON.stringify(r.body ?? '').includes('user.tool_result'),
      );
      expect(results).toHaveLength(2);
      const lastResultAt = endOf(results.at(-1)!);
      // One write (the edit), sent after the result was posted and within a second of it.
      expect(writes.map((w) => w.route)).toEqual(['POST /v1/memory_stores/:id/memories/:memoryId']);
      const lagMs = endOf(writes[0]!) - lastResultAt;
      expect(lagMs).toBeGreaterThanOrEqual(0);
      expect(lagMs).toBeLessThan(1_000);
      // The push sends no deletion: the removed file's memory waits for a later sync.
      expect(emu.memories(store.id)['/old.md']).toBe('to be removed');
      const done = await emu.waitForSession(sessionId, { timeoutMs: 30_000 });
      expect(done.toolResults.map((r) => r.isError)).toEqual([false, false]);
      // The final sync then sends the deletion.
      expect(emu.memories(store.id)).toEqual({ '/plan.md': 'v2, written in the last call of the turn' });
    } finally {
      await worker.close();
      await running;
    }
  }, 60_000);

  it('a turn whose calls changed nothing sends no write when it goes idle', async () => {
    const store = await emu.createMemoryStore({ name: 'notes', memories: { '/plan.md': 'v1' } });
    const root = path.join(h.mountRoot, 'notes');
    const { sessionId } = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [{ tool: 'read', input: { file_path: `${root}/plan.md` } }],
      end: { idleMs: 2_000 },
    });
    const worker = h.worker({ memorySyncIntervalMs: 30_000, finalFlushMs: 30_000 });
    const running = worker.run();
    try {
      await emu.waitForSession(sessionId, { timeoutMs: 30_000 });
      expect(emu.requests.filter((r) => WRITE_ROUTES.has(r.route))).toEqual([]);
      expect(await fsp.readdir(h.mountRoot)).toEqual([]);
    } finally {
      await worker.close();
      await running;
    }
  }, 60_000);
});
