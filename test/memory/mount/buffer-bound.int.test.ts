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
    const mounter = new MemoryMounter({ client, logger: captureLogger().logger, stateDir: h.stateDir, bufferBytes: 2 * 1024 * KIB, bufferProbe: (b) => (budgets = b) });
    mounter.on('downloaded', () => {
      seen.files++;
      seen.writes = Math.max(seen.writes, budgets!.writes.used);
      seen.pages = Math.max(seen.pages, budgets!.pages.used);
    });
    const mounted = await mounter.mount(session);
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
    for (let i = 0; i < 2; i++) {
      const tree = await readTree(mounted.stores[i]!.root);
      expect(Object.keys(tree)).toHaveLength(60);
      for (const [p, c] of Object.entries(contents[i]!)) expect(tree[p.slice(1)]).toBe(c);
    }
    console.info(`[figure] 2 x 60 x 80 KiB with a 2 MiB buffer: peak queued ${Math.round(b.writes.peak / KIB)} KiB, peak pages ${Math.round(b.pages.peak / KIB)} KiB`);
    await mounted.unmount();
  }, 60_000);

  it('refuses a buffer below 1 MiB with a ConfigError naming the option', () => {
    expect(() => new MemoryMounter({ client: {} as never, bufferBytes: 1000 })).toThrow(ConfigError);
    expect(() => new MemoryMounter({ client: {} as never, bufferBytes: 1000 })).toThrow(/memoryBufferBytes: expected an integer number of bytes from 1048576/);
  });
});
