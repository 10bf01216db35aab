/**
 * Pins the folder-split listing a mount downloads with: every memory of the store arrives once with
 * its content (top-level ones, deep ones, folders of one page or many), each top-level folder is
 * paged on its own cursor through the shared limiter, and a listing that yields more than the cap
 * is stopped with an error instead of growing without bound.
 */
import pLimit from 'p-limit';
import { afterEach, describe, expect, it } from 'vitest';
import { ListingBoundError, listFullByFolder } from '../../src/memory/parallel-listing.js';
import type { RemoteMemoryWithContent } from '../../src/memory/remote-store.js';
import { harness, type Harness } from './int-helpers.js';

const LIST = 'GET /v1/memory_stores/:id/memories';

describe('listFullByFolder', () => {
  let h: Harness;
  afterEach(async () => h.cleanup());

  async function setUp(memories: Record<string, string>) {
    h = await harness({ latencyMs: 5 });
    const store = await h.emu.createMemoryStore({ name: 'Split', memories });
    const { sessionId } = await h.emu.createSession({ resources: [{ memoryStoreId: store.id }] });
    return { storeId: store.id, client: h.emu.sessionClient(sessionId) };
  }

  const options = (storeId: string, limit = pLimit(16), maxMemories = 2000) => ({
    storeId,
    signal: new AbortController().signal,
    limit,
    maxMemories,
    readRetries: 0,
    requestTimeoutMs: 10_000,
  });

  it('yields every memory once with its content, top-level and nested, and pages each top-level folder on its own cursor', async () => {
    const memories: Record<string, string> = { '/readme.md': 'top', '/deep/a/b/c.md': 'deep' };
    for (let i = 0; i < 45; i++) memories[`/big/n-${String(i).padStart(2, '0')}.md`] = `big ${i}`;
    for (let i = 0; i < 3; i++) memories[`/small/s-${i}.md`] = `small ${i}`;
    const { storeId, client } = await setUp(memories);

    const got: RemoteMemoryWithContent[] = [];
    await listFullByFolder(client, options(storeId), (m) => {
      got.push(m);
    });

    expect(Object.fromEntries(got.map((m) => [m.path, m.content]))).toEqual(memories);
    expect(got).toHaveLength(Object.keys(memories).length);
    const lists = h.emu.requests.filter((r) => r.route === LIST);
    const firstPages = lists.filter((r) => r.query['page'] === undefined).map((r) => [r.query['path_prefix'], r.query['depth'] ?? null]);
    expect(firstPages.sort()).toEqual([['/', '1'], ['/big/', null], ['/deep/', null], ['/small/', null]]);
    // 45 memories in /big/ take three pages of 20 in the full view.
    expect(lists.filter((r) => r.query['path_prefix'] === '/big/')).toHaveLength(3);
    expect(lists.every((r) => r.query['view'] === 'full')).toBe(true);
  });

  it('sends every page through the limiter it is given', async () => {
    const memories: Record<string, string> = {};
    for (let f = 0; f < 6; f++) for (let i = 0; i < 25; i++) memories[`/f${f}/m${i}.md`] = `${f}/${i}`;
    const { storeId, client } = await setUp(memories);
    let inFlight = 0;
    let most = 0;
    const inner = pLimit(2);
    const counting = Object.assign(
      <T>(fn: () => Promise<T>) =>
        inner(async () => {
          inFlight++;
          most = Math.max(most, inFlight);
          try {
            return await fn();
          } finally {
            inFlight--;
          }
        }),
      inner,
    ) as unknown as ReturnType<typeof pLimit>;

    let count = 0;
    await listFullByFolder(client, options(storeId, counting), () => {
      count++;
    });

    expect(count).toBe(150);
    expect(most).toBe(2);
    // One depth-1 page, then two pages for each of the six folders.
    expect(h.emu.requests.filter((r) => r.route === LIST)).toHaveLength(13);
  });

  it('waits for a promise onMemory returns before requesting the next page (backpressure)', async () => {
    const memories: Record<string, string> = {};
    for (let i = 0; i < 60; i++) memories[`/f/m${String(i).padStart(2, '0')}.md`] = String(i);
    const { storeId, client } = await setUp(memories);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let count = 0;

    const listing = listFullByFolder(client, options(storeId), () => {
      count++;
      return count === 1 ? gate : undefined;
    });
    await new Promise((r) => setTimeout(r, 300));
    const whileBlocked = { count, requests: h.emu.requests.filter((r) => r.route === LIST).length };
    release();
    await listing;

    // The depth-1 listing and the folder's first page (20 memories handed out); the other two pages wait.
    expect(whileBlocked).toEqual({ count: 20, requests: 2 });
    expect(count).toBe(60);
  });

  it('stops with a ListingBoundError once the store yields more memories than the cap', async () => {
    const memories: Record<string, string> = {};
    for (let i = 0; i < 30; i++) memories[`/f/m${i}.md`] = String(i);
    const { storeId, client } = await setUp(memories);

    const err = await listFullByFolder(client, options(storeId, pLimit(4), 25), () => {}).catch((e: unknown) => e);

    expect(err).toBeInstanceOf(ListingBoundError);
    expect((err as Error).message).toContain(storeId);
  });
});
