// Pins how bad items end without stopping the worker: stores + memory on + no secret fails the item
// with the missing-secret message; memory off runs the session without its stores, with a warning naming them; something already
// at a mount path fails that item with the something-at-the-path message; in every case the item is stopped and the
// next item is served.
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ItemOutcome } from '../../src/worker/environment-worker.js';
import { exists, harness, stopRequests, type Harness } from './helpers.js';

describe('items that cannot be served as asked', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('fails an item without a secret whose session has stores, then serves the next item', async () => {
    const { emu } = h;
    const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } });
    const bad = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [{ tool: 'bash', input: { command: 'true' } }],
      secret: false,
      end: 'idle',
    });
    const good = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo fine' } }] });
    const worker = h.worker();
    const failed: Array<{ workId: string; error: Error }> = [];
    worker.on('workFailed', (e) => failed.push(e));
    const running = worker.run();
    const done = await emu.waitForSession(good.sessionId, { timeoutMs: 20_000 });
    await worker.close();
    await running;

    expect(failed).toHaveLength(1);
    expect(failed[0]!.workId).toBe(bad.workId);
    expect(failed[0]!.error.message).toContain('carried no sessions token');
    expect(failed[0]!.error.message).toContain("Forward the work item's `secret`");
    expect(failed[0]!.error.message).toContain('memorySyncIntervalMs: null');
    expect((failed[0]!.error as { code?: string }).code).toBe('MAW_MEMORY_UNAVAILABLE');
    expect(emu.workItem(bad.workId).state).toBe('stopped');
    expect(emu.session(bad.sessionId).toolResults).toEqual([]);
    expect(emu.requests.some((r) => r.path.startsWith('/v1/memory_stores'))).toBe(false);
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['fine']);
    expect(worker.metrics()).toMatchObject({ itemsFailed: 1, itemsCompleted: 1 });
    emu.archiveSession(bad.sessionId);
  });

  it('runs the session without its stores when memory is off, touching no memory endpoint', async () => {
    const { emu } = h;
    const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } });
    const dir = path.join(h.mountRoot, 'notes');
    const { sessionId } = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [{ tool: 'bash', input: { command: `test -e ${JSON.stringify(dir)} && echo mounted || echo absent` } }],
      secret: false,
    });
    const worker = h.worker({ memorySyncIntervalMs: null });
    const outcomes: ItemOutcome[] = [];
    worker.on('sessionEnded', (e) => outcomes.push(e.outcome));
    const running = worker.run();
    const done = await emu.waitForSession(sessionId, { timeoutMs: 20_000 });
    await worker.close();
    await running;

    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['absent']);
    expect(done.workStopped).toBe(true);
    expect(outcomes.map((o) => o.status)).toEqual(['completed']);
    expect(emu.requests.some((r) => r.path.startsWith('/v1/memory_stores'))).toBe(false);
    // Not silent: one warning names the store the agent will not find, with the fix.
    const warnings = h.capture.lines.filter((l) => l.level >= 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toContain('memory is off (memorySyncIntervalMs: null)');
    expect(warnings[0]!.msg).toContain(`"Notes" (${store.id} at ${dir})`);
    expect(warnings[0]!['session_id']).toBe(sessionId);
    expect(String(warnings[0]!['fix'])).toContain('memorySyncIntervalMs');
  });

  it('fails the item whose mount path is taken, leaves the path alone, and serves the next item', async () => {
    const { emu } = h;
    const store = await emu.createMemoryStore({ name: 'User Preferences', memories: { '/tone.md': 'brief' } });
    const dir = path.join(h.mountRoot, 'user-preferences');
    await fsp.mkdir(dir);
    await fsp.writeFile(path.join(dir, 'precious.txt'), 'keep me');
    const bad = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [{ tool: 'bash', input: { command: 'true' } }],
      end: 'idle',
    });
    const good = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo next' } }] });
    const worker = h.worker({ sandbox: 'none' }); // tools in the worker: the store's folder is its mount path
    const failed: Error[] = [];
    worker.on('workFailed', (e) => failed.push(e.error));
    const running = worker.run();
    const done = await emu.waitForSession(good.sessionId, { timeoutMs: 20_000 });
    await worker.close();
    await running;

    expect(failed).toHaveLength(1);
    expect((failed[0] as { code?: string }).code).toBe('MAW_MEMORY_MOUNT');
    expect(failed[0]!.message).toContain(store.id);
    expect(failed[0]!.message).toContain(dir);
    expect(failed[0]!.message).toMatch(/already exists/);
    expect(await fsp.readFile(path.join(dir, 'precious.txt'), 'utf8')).toBe('keep me');
    expect(stopRequests(h, bad.workId).map((r) => r.body)).toEqual([{ force: true }]);
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['next']);
    expect(await exists(dir)).toBe(true);
    emu.archiveSession(bad.sessionId);
  });
});
