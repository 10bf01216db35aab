/**
 * Pins that the folder-split listings of two stores sharing one page limiter and one byte gate
 * always finish: a store's two first pages (the whole store's and the depth-1 one) take their bytes
 * together, in one slot, before either is asked for. Before, a store that started while another
 * held the gate's bytes could get its whole-store page granted and then wait for ever for the
 * depth-1 page's bytes, which its own held page kept from fitting under the bound.
 */
import pLimit from 'p-limit';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ByteBudget } from '../../../src/memory/remote/byte-budget.js';
import { PageGate } from '../../../src/memory/remote/page-budget.js';
import { RemoteStore } from '../../../src/memory/remote/remote-store.js';
import { harness, openSession, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

/** 3 folders of 25 memories of 80 KiB: every full page (20 memories) weighs about 1.6 MB. */
function heavyStore(tag: string): Record<string, string> {
  const memories: Record<string, string> = {};
  for (let f = 0; f < 3; f++) for (let i = 0; i < 25; i++) memories[`/f${f}/${tag}-${i}.md`] = `${tag}${f}${i}`.padEnd(80 * 1024, 'x');
  return memories;
}

describe('two stores listed through one gate', () => {
  it('both finish when the second starts while the first holds the bytes, every page given back', async () => {
    const a = await h.emu.createMemoryStore({ name: 'A', memories: heavyStore('a') });
    const b = await h.emu.createMemoryStore({ name: 'B', memories: heavyStore('b') });
    const { client } = await openSession(h.emu, [{ memoryStoreId: a.id }, { memoryStoreId: b.id }]);
    const gate = new PageGate(new ByteBudget(2 * 1024 * 1024));
    const pages = pLimit(4);
    const seen = { a: 0, b: 0 };
    let listingB: Promise<void> | undefined;
    const listingA = new RemoteStore(client, a.id).listFull(
      undefined,
      async () => {
        seen.a++;
        // B starts once A holds a heavy page and the gate has learnt what a page weighs.
        listingB ??= new RemoteStore(client, b.id).listFull(undefined, () => void seen.b++, undefined, { parallel: 4, pages, gate });
        await new Promise((r) => setImmediate(r));
      },
      undefined,
      { parallel: 4, pages, gate },
    );
    const finished = (async () => {
      await listingA;
      await listingB;
      return 'finished';
    })();
    const outcome = await Promise.race([finished, new Promise((r) => setTimeout(() => r('stuck'), 20_000))]);
    expect(outcome).toBe('finished');
    expect(seen).toEqual({ a: 75, b: 75 });
    expect(gate.budget.used).toBe(0);
  }, 30_000);
});
