/**
 * Pins the cheap-sync and fast-mount promises on the emulator's request log: an idle sync
 * of a 2 000-memory store sends exactly 20 basic-view listing requests (100 per page) and nothing
 * else, and reads no file; mounting 8 stores of 250 memories downloads them in parallel (the
 * stores' request windows overlap in time); both download strategies give the same folders; a
 * 20-page listing on one cursor draws no listener warning from Node.
 */
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMounter, SyncLoop } from '../../../src/memory/index.js';
import { RemoteStore } from '../../../src/memory/remote/remote-store.js';
import { captureLogger, harness, manualClock, memoriesOf, openSession, readTree, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

const LIST = 'GET /v1/memory_stores/:id/memories';

describe('at scale', () => {
  it('an idle sync of a 2 000-memory store makes exactly 20 listing requests and no other', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Big', memories: memoriesOf(2_000) });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const log = captureLogger();
    const mounted = await new MemoryMounter({ client, logger: log.logger }).mount(session);
    expect(mounted.stores[0]!.memories).toBe(2_000);
    const loop = new SyncLoop({ client, mounted, logger: log.logger, stateDir: h.stateDir, clock: manualClock() });
    const mark = h.emu.requests.length;
    const started = Date.now();
    const report = await loop.syncNow();
    const idleMs = Date.now() - started;
    const sent = h.emu.requests.slice(mark);
    expect(sent.map((r) => r.route)).toEqual(Array(20).fill(LIST));
    expect(sent.every((r) => r.query['view'] === 'basic' && r.query['limit'] === '100')).toBe(true);
    expect(report).toMatchObject({ uploads: 0, downloads: 0, errors: 0 });
    // No file content read: every file was answered by the stat cache.
    const scans = log.lines.filter((l) => l.msg === 'local scan done');
    expect(scans.at(-1)).toMatchObject({ files: 2_000, files_read: 0 });
    console.info(`[figure] idle sync of 2000 memories: ${sent.length} requests, ${idleMs} ms`);
    await loop.finish({ clean: false });
  }, 60_000);

  it('pages a 2 000-memory listing on one cursor without a listener warning from Node', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Long', memories: memoriesOf(2_000) });
    const { client } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    try {
      expect(await new RemoteStore(client, store.id).listBasic()).toHaveLength(2_000);
      // Warnings are emitted on the next tick.
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([]);
  }, 60_000);

  it('mounts 8 stores of 250 memories in parallel', async () => {
    const stores = [];
    for (let i = 0; i < 8; i++) stores.push(await h.emu.createMemoryStore({ name: `Store ${i}`, memories: memoriesOf(250, `s${i}`) }));
    const { client, session } = await openSession(
      h.emu,
      stores.map((s) => ({ memoryStoreId: s.id })),
    );
    const mark = h.emu.requests.length;
    const started = Date.now();
    const mounted = await new MemoryMounter({ client, logger: captureLogger().logger }).mount(session);
    const mountMs = Date.now() - started;
    expect(mounted.stores.map((s) => s.memories)).toEqual(Array(8).fill(250));
    const tree = await readTree(path.join(h.mountRoot, 'store-3'));
    expect(Object.keys(tree)).toHaveLength(250);
    expect(tree['s3/0007.md']).toBe('memory 7 of s3\n');
    // Each store's download window [first request start, last request end]; all windows overlap.
    const windows = stores.map((s) => {
      const reqs = h.emu.requests.slice(mark).filter((r) => r.path.includes(s.id));
      return { start: Math.min(...reqs.map((r) => r.startedAt)), end: Math.max(...reqs.map((r) => r.startedAt + r.ms)) };
    });
    const latestStart = Math.max(...windows.map((w) => w.start));
    const earliestEnd = Math.min(...windows.map((w) => w.end));
    expect(latestStart).toBeLessThanOrEqual(earliestEnd);
    console.info(`[figure] mount 8 x 250 memories (list-full): ${mountMs} ms`);
    await mounted.unmount();
  }, 60_000);

  it('both download strategies materialise the same folders', async () => {
    const stores = [];
    for (let i = 0; i < 3; i++) stores.push(await h.emu.createMemoryStore({ name: `Cmp ${i}`, memories: memoriesOf(120, `c${i}`) }));
    const trees: Record<string, Array<Record<string, string>>> = {};
    for (const via of ['retrieve', 'list-full'] as const) {
      const { client, session } = await openSession(
        h.emu,
        stores.map((s) => ({ memoryStoreId: s.id })),
      );
      const mounted = await new MemoryMounter({ client, logger: captureLogger().logger, downloadVia: via }).mount(session);
      expect(mounted.stores.map((s) => s.memories)).toEqual([120, 120, 120]);
      trees[via] = await Promise.all(stores.map((_, i) => readTree(path.join(h.mountRoot, `cmp-${i}`))));
      await mounted.unmount();
    }
    expect(trees['retrieve']).toEqual(trees['list-full']);
    expect(Object.keys(trees['list-full']![2]!)).toHaveLength(120);
    expect(trees['list-full']![2]!['c2/0119.md']).toBe('memory 119 of c2\n');
  }, 60_000);
});
