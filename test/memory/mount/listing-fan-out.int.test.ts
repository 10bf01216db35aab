/**
 * Pins the listing fan-out of a mount: its pages (a depth-1 page per store, then each top-level
 * folder on its own cursor) take up to twice `concurrency` slots at once across all its stores, never
 * more, so a store tree of many short cursors takes fewer round trips than its writes' fan-out would
 * allow. A slot holds one page, or a store's two first pages (the whole store's and the depth-1
 * one), asked for together: at fan-out 1 no more than `concurrency` + one per store could be in flight.
 * Read from the emulator's request log (start and answer time of each listing request), with a
 * latency that keeps every page in flight long enough to overlap.
 */
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMounter } from '../../../src/memory/index.js';
import { LISTING_FAN_OUT } from '../../../src/memory/mount/mounter.js';
import { mostAtOnce } from '../../requests-at-once.js';
import { captureLogger, harness, openSession, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness({ latencyMs: 40 });
});
afterEach(async () => {
  await h.cleanup();
});

describe('a mount lists its stores with twice its concurrency in flight', () => {
  it('4 stores × 8 folders × 25 memories at concurrency 3: more listing requests at once than 3 slots allow, never more than 6 slots do', async () => {
    const stores = [];
    for (let s = 0; s < 4; s++) {
      const memories: Record<string, string> = {};
      for (let i = 0; i < 200; i++) memories[`/folder-${i % 8}/note-${String(i).padStart(3, '0')}.md`] = `store ${s} note ${i}\n`;
      stores.push(await h.emu.createMemoryStore({ name: `Fan ${s}`, memories }));
    }
    const { client, session } = await openSession(
      h.emu,
      stores.map((s, i) => ({ memoryStoreId: s.id, mountPath: path.join(h.mountRoot, `fan-${i}`) })),
    );
    const concurrency = 3;
    const mounter = new MemoryMounter({ client, logger: captureLogger().logger, stateDir: h.stateDir, concurrency });
    const from = h.emu.requests.length;
    const mounted = await mounter.mount(session);
    const listings = h.emu.requests.slice(from).filter((r) => r.path.startsWith('/v1/memory_stores/') && r.path.endsWith('/memories'));
    expect(mounted.stores.map((s) => s.memories)).toEqual([200, 200, 200, 200]);
    // 4 depth-1 pages and 2 pages for each of the 32 folders: enough to fill the fan-out.
    expect(listings.length).toBeGreaterThanOrEqual(4 + 32);
    const most = mostAtOnce(listings);
    const slots = LISTING_FAN_OUT * concurrency;
    expect(most).toBeGreaterThan(concurrency + Math.min(stores.length, concurrency));
    expect(most).toBeLessThanOrEqual(slots + Math.min(stores.length, slots));
    await mounted.unmount?.();
  });
});
