/**
 * Pins the memory core's own log lines and progress events: a sync that changed a store logs one
 * `info` line for it (with the store id and the counts) and an idle sync logs none at info; a mount
 * still downloading logs a progress line per store every few seconds and emits `mountProgress`.
 */
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryMounter, SyncLoop } from '../../../src/memory/index.js';
import { captureLogger, harness, manualClock, memoriesOf, openSession, type Harness } from '../int-helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe('memory log lines', () => {
  it('logs one info line per store a sync changed, none for an idle sync', async () => {
    h = await harness();
    const store = await h.emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const cap = captureLogger();
    const mounted = await new MemoryMounter({ client, logger: cap.logger, stateDir: h.stateDir }).mount(session);
    const loop = new SyncLoop({ client, mounted, logger: cap.logger, stateDir: h.stateDir, clock: manualClock() });
    const changed = (): typeof cap.lines => cap.lines.filter((l) => l.msg === 'memory sync changed this store');
    await loop.syncNow();
    expect(changed()).toHaveLength(0);
    await fsp.writeFile(path.join(mounted.roots[0]!, 'a.md'), 'edited');
    await loop.syncNow();
    expect(changed()).toHaveLength(1);
    expect(changed()[0]).toMatchObject({ level: 30, memory_store_id: store.id, uploads: 1, phase: 'sync' });
    await loop.syncNow();
    expect(changed()).toHaveLength(1);
    await loop.finish({ clean: true });
  });

  it('reports the progress of a mount still downloading, per store, as a log line and an event', async () => {
    h = await harness({ latencyMs: 40 });
    const store = await h.emu.createMemoryStore({ name: 'Slow', memories: memoriesOf(30) });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const cap = captureLogger();
    const mounter = new MemoryMounter({
      client,
      logger: cap.logger,
      stateDir: h.stateDir,
      downloadVia: 'retrieve',
      concurrency: 1,
      progressIntervalMs: 200,
    });
    const events: Array<{ storeId: string; memories: number }> = [];
    mounter.on('mountProgress', (e) => events.push(e));
    const mounted = await mounter.mount(session);
    const lines = cap.lines.filter((l) => l.msg === 'memory store still downloading');
    expect(lines.length).toBeGreaterThan(0);
    expect(lines[0]).toMatchObject({ level: 30, memory_store_id: store.id, root: mounted.roots[0] });
    expect(events.length).toBe(lines.length);
    expect(events.every((e) => e.storeId === store.id && e.memories <= 30)).toBe(true);
    const before = lines.length;
    await new Promise((r) => setTimeout(r, 500));
    expect(cap.lines.filter((l) => l.msg === 'memory store still downloading')).toHaveLength(before);
    await mounted.unmount();
  });
});
