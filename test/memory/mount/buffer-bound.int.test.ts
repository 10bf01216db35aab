/**
 * Pins "memory bounded by our side, not by the content": a mount of stores of large memories holds
 * at most its buffer bound of content at once. Instrumented, not timed: the mount's two byte
 * budgets (listing pages in flight, files waiting to be written) are watched at every file written,
 * and their peaks read at the end. The files are all there and whole.
 */
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { MemoryMounter } from '../../../src/memory/index.js';
import type { ByteBudget } from '../../../src/memory/remote/byte-budget.js';
import { pagePoolStats, resetPagePoolPeak } from '../../../src/memory/remote/page-bytes.js';
import { captureLogger, harness, openSession, readTree, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

const KIB = 1024;

function largeMemories(store: number, n: number, bytes: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < n; i++) {
    const head = `store ${store} memory ${i}\n`;
    out[`/folder-${i % 5}/note-${String(i).padStart(4, '0')}.md`] = head + String.fromCharCode(97 + (i % 26)).repeat(bytes - head.length);
  }
  return out;
}

describe('the mount buffer bound', () => {
  it('holds at most the bound of queued writes and pages in flight mounting 2 stores x 60 x 80 KiB (9.4 MiB) with a 2 MiB buffer', async () => {
    const contents = [largeMemories(0, 60, 80 * KIB), largeMemories(1, 60, 80 * KIB)];
    const stores = await Promise.all(contents.map((memories, i) => h.emu.createMemoryStore({ name: `Large ${i}`, memories })));
    const { client, session } = await openSession(
      h.emu,
      stores.map((s, i) => ({ memoryStoreId: s.id, mountPath: path.join(h.mountRoot, `large-${i}`) })),
    );
    let budgets: { pages: ByteBudget; writes: ByteBudget } | undefined;
    const seen = { writes: 0, pages: 0, files: 0 };
    const mounter = new MemoryMounter({
      client,
      logger: captureLogger().logger,
      stateDir: h.stateDir,
      bufferBytes: 2 * 1024 * KIB,
      bufferProbe: (b) => (budgets = b),
    });
    mounter.on('downloaded', () => {
      seen.files++;
      seen.writes = Math.max(seen.writes, budgets!.writes.used);
      seen.pages = Math.max(seen.pages, budgets!.pages.used);
    });
    const poolBefore = pagePoolStats().outstandingBytes;
    resetPagePoolPeak();
    const mounted = await mounter.mount(session);
    const pool = pagePoolStats();
    const b = budgets!;
    expect(b.writes.bound).toBe(1024 * KIB);
    expect(b.pages.bound).toBe(1024 * KIB);
    expect(seen.files).toBe(120);
    // Queued writes: never past the bound (an item enters the queue only once its bytes are granted).
    expect(seen.writes).toBeLessThanOrEqual(b.writes.bound);
    expect(b.writes.peak).toBeLessThanOrEqual(b.writes.bound);
    // The queues really filled to the bound: the budget, not the listing's pace, held them back.
    expect(b.writes.peak).toBeGreaterThan(b.writes.bound - 2 * 80 * KIB);
    // Pages in flight: within the bound (or one page alone, when a page weighs more) plus the first
    // page of each store, asked for on a guess before any page was read: not the 9.4 MiB of content.
    const page = 20 * 81 * KIB;
    expect(b.pages.peak).toBeLessThanOrEqual(Math.max(b.pages.bound, page) + 2 * page);
    // Everything granted was given back.
    expect({ writes: b.writes.used, pages: b.pages.used }).toEqual({ writes: 0, pages: 0 });
    // The pages' buffers, where the contents wait as bytes: every one back in the pool after the
    // mount, and never more at once than the pages in flight and the queued contents weigh, plus
    // the buffer (the 2 MiB size class, for a 1.6 MiB page) of the page each store's queue is partly
    // through: well under the 9.4 MiB of content.
    expect(pool.outstandingBytes).toBe(poolBefore);
    expect(pool.outstandingPeakBytes - poolBefore).toBeLessThanOrEqual(b.pages.peak + b.writes.peak + 2 * 2048 * KIB);
    expect(b.pages.peak + b.writes.peak + 2 * 2048 * KIB).toBeLessThan(9.4 * 1024 * KIB);
    for (let i = 0; i < 2; i++) {
      const tree = await readTree(mounted.stores[i]!.root);
      expect(Object.keys(tree)).toHaveLength(60);
      for (const [p, c] of Object.entries(contents[i]!)) expect(tree[p.slice(1)]).toBe(c);
    }
    console.info(
      `[figure] 2 x 60 x 80 KiB with a 2 MiB buffer: peak queued ${Math.round(b.writes.peak / KIB)} KiB, peak pages ${Math.round(b.pages.peak / KIB)} KiB, ` +
        `peak page buffers ${Math.round((pool.outstandingPeakBytes - poolBefore) / KIB)} KiB`,
    );
    await mounted.unmount();
  }, 60_000);

  it('keeps a warm mount within the bound: the cache misses it retrieves and the folder it lists again count in the pages in flight', async () => {
    const memories = largeMemories(0, 60, 40 * KIB);
    const store = await h.emu.createMemoryStore({ name: 'Warm large', memories });
    const spec = [{ memoryStoreId: store.id, mountPath: path.join(h.mountRoot, 'warm') }];
    const opts = { logger: captureLogger().logger, stateDir: h.stateDir, bufferBytes: 2 * 1024 * KIB, contentCacheBytes: 64 * 1024 * KIB };
    const first = await openSession(h.emu, spec);
    // The unmount waits for the cache's writes: every content is cached after it.
    await (await new MemoryMounter({ client: first.client, ...opts }).mount(first.session)).unmount();
    // folder-0: its 12 memories changed (more misses than twice its one full page: listed again in
    // full); folder-1: 2 of its 12 (retrieved one by one). The other 46 come from the cache.
    const want = Object.fromEntries(Object.entries(memories).map(([p, c]) => [p.slice(1), c]));
    let edited = 0;
    let inFolder1 = 0;
    for (const p of Object.keys(memories)) {
      const folder = p.split('/')[1];
      if (folder === 'folder-0' || (folder === 'folder-1' && inFolder1++ < 2)) {
        const c = `edited ${p}\n`.padEnd(90 * KIB, 'z');
        h.emu.putMemory(store.id, p, c);
        want[p.slice(1)] = c;
        edited++;
      }
    }
    expect(edited).toBe(14);
    const second = await openSession(h.emu, spec);
    let budgets: { pages: ByteBudget; writes: ByteBudget } | undefined;
    const from = h.emu.requests.length;
    const mounted = await new MemoryMounter({ client: second.client, ...opts, bufferProbe: (b) => (budgets = b) }).mount(second.session);
    const reqs = h.emu.requests.slice(from);
    const lists = reqs.filter((r) => r.route === 'GET /v1/memory_stores/:id/memories');
    expect({
      full: lists.filter((r) => r.query['view'] === 'full').length,
      retrieves: reqs.filter((r) => r.route === 'GET /v1/memory_stores/:id/memories/:memoryId').length,
    }).toEqual({ full: 1, retrieves: 2 });
    expect(await readTree(mounted.stores[0]!.root)).toEqual(want);
    const b = budgets!;
    // The contents fetched went through the page budget (the basic pages, which carry none, do not).
    expect(b.pages.peak).toBeGreaterThanOrEqual(12 * 90 * KIB);
    // Within the bound, or one page alone when a page weighs more (folder-0's page: about 1.1 MiB
    // with its JSON), plus the two retrieves: that page is asked for on the first-page guess (no
    // full page was read yet in this mount), so they were granted before its real weight was known.
    expect(b.pages.peak).toBeLessThanOrEqual(Math.max(b.pages.bound, 12 * 93 * KIB) + 2 * 91 * KIB);
    expect(b.writes.peak).toBeLessThanOrEqual(b.writes.bound);
    expect({ writes: b.writes.used, pages: b.pages.used }).toEqual({ writes: 0, pages: 0 });
    console.info(
      `[figure] warm mount, 14 of 60 changed (90 KiB): peak queued ${Math.round(b.writes.peak / KIB)} KiB, peak pages ${Math.round(b.pages.peak / KIB)} KiB`,
    );
    await mounted.unmount();
  }, 60_000);

  it('gives back every page of a flat store (one folder, paged on the whole-store cursor) and of a store whose first page is the whole listing', async () => {
    const flat: Record<string, string> = {};
    for (let i = 0; i < 50; i++) flat[`/flat/note-${i}.md`] = `flat ${i} `.padEnd(8 * KIB, '.');
    const stores = [
      await h.emu.createMemoryStore({ name: 'Flat', memories: flat }),
      await h.emu.createMemoryStore({ name: 'Small', memories: { '/a.md': 'a', '/f/b.md': 'b' } }),
    ];
    const { client, session } = await openSession(
      h.emu,
      stores.map((s, i) => ({ memoryStoreId: s.id, mountPath: path.join(h.mountRoot, `flat-${i}`) })),
    );
    let budgets: { pages: ByteBudget; writes: ByteBudget } | undefined;
    const from = h.emu.requests.length;
    const mounter = new MemoryMounter({
      client,
      logger: captureLogger().logger,
      stateDir: h.stateDir,
      contentCacheBytes: 0,
      bufferProbe: (b) => (budgets = b),
    });
    const mounted = await mounter.mount(session);
    const lists = h.emu.requests.slice(from).filter((r) => r.route === 'GET /v1/memory_stores/:id/memories');
    // Flat: the whole-store page and the depth-1 page at once, then the whole-store cursor (3 pages of 20).
    expect(lists.filter((r) => r.path.includes(stores[0]!.id)).length).toBe(4);
    expect(Object.keys(await readTree(mounted.stores[0]!.root))).toHaveLength(50);
    expect({ writes: budgets!.writes.used, pages: budgets!.pages.used }).toEqual({ writes: 0, pages: 0 });
    expect(budgets!.pages.peak).toBeGreaterThan(0);
    await mounted.unmount();
  }, 60_000);

  it('refuses a buffer below 1 MiB with a ConfigError naming the option', () => {
    expect(() => new MemoryMounter({ client: {} as never, bufferBytes: 1000 })).toThrow(ConfigError);
    expect(() => new MemoryMounter({ client: {} as never, bufferBytes: 1000 })).toThrow(
      /memoryBufferBytes: expected an integer number of bytes from 1048576/,
    );
  });
});
