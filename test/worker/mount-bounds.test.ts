// Pins the worker side of the mount bounds: a session whose mount outlives `mountTimeoutMs` fails
// cleanly (typed error naming the store and the option, folder removed, item stopped) and the
// worker serves the next item; a store outside `allowedMountRoots` fails its item the same way.
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exists, harness, type Harness } from './helpers.js';

describe('mount bounds in the worker', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('fails an item whose mount outlives mountTimeoutMs, then serves the next item', async () => {
    const { emu } = h;
    const store = await emu.createMemoryStore({ name: 'Slow', memories: { '/a.md': 'A' } });
    emu.faults.add({ route: new RegExp(`^GET /v1/memory_stores/${store.id}/memories$`), hang: true });
    const slow = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [{ tool: 'bash', input: { command: 'true' } }],
      end: 'idle',
    });
    const good = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo fine' } }] });
    const worker = h.worker({ mountTimeoutMs: 1_000 });
    const failed: Array<{ workId: string; error: Error }> = [];
    worker.on('workFailed', (e) => failed.push(e));
    const running = worker.run();
    const done = await emu.waitForSession(good.sessionId, { timeoutMs: 30_000 });
    await worker.close();
    await running;

    expect(failed.map((f) => f.workId)).toEqual([slow.workId]);
    expect(failed[0]!.error.message).toContain('did not finish within 1000 ms');
    expect(failed[0]!.error.message).toContain(store.id);
    expect((failed[0]!.error as { code?: string }).code).toBe('MAW_MEMORY_MOUNT');
    expect(emu.workItem(slow.workId).state).toBe('stopped');
    expect(await exists(path.join(h.mountRoot, 'slow'))).toBe(false);
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['fine']);
    emu.archiveSession(slow.sessionId);
  }, 40_000);

  it('fails an item whose store is outside allowedMountRoots, creating nothing', async () => {
    const { emu } = h;
    const store = await emu.createMemoryStore({ name: 'Elsewhere', memories: { '/a.md': 'A' } });
    const bad = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [{ tool: 'bash', input: { command: 'true' } }],
      end: 'idle',
    });
    const worker = h.worker({ allowedMountRoots: ['/srv/allowed-only'] });
    const failed: Array<{ workId: string; error: Error }> = [];
    worker.on('workFailed', (e) => failed.push(e));
    const running = worker.run();
    const deadline = Date.now() + 20_000;
    while (failed.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await worker.close();
    await running;

    expect(failed[0]?.error.message).toContain('outside the allowed mount roots (/srv/allowed-only)');
    expect(emu.workItem(bad.workId).state).toBe('stopped');
    expect(await exists(path.join(h.mountRoot, 'elsewhere'))).toBe(false);
    emu.archiveSession(bad.sessionId);
  }, 40_000);
});
