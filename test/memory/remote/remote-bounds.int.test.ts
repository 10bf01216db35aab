/**
 * Pins the bounds on what the server answers, over real HTTP against the emulator rewriting its
 * answers like a wrong server (and how a listing pages: one page asked ahead of the items handed on): a listing stops with a typed RemoteLimitError at a cursor seen
 * before, past the pages or memories a store can hold, at a duplicate path or a malformed page;
 * a body is never read past what its content can weigh; a memory over the size limit is refused
 * (left out of the mount with a warning naming it) while the others mount; and a mount whose
 * listing never ends fails cleanly, leaving no folder.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMountError, RemoteLimitError } from '../../../src/errors.js';
import { MemoryMounter } from '../../../src/memory/index.js';
import { MAX_LISTED_MEMORIES, RemoteStore } from '../../../src/memory/remote/remote-store.js';
import type { PageContent } from '../../../src/memory/remote/page-bytes.js';
import { captureLogger, harness, openSession, type Harness } from '../int-helpers.js';

/** A listed content as text: as the page carried it, read once. */
const listedText = (c: string | PageContent): string => (typeof c === 'string' ? c : c.text());

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

const LISTING = /^GET \/v1\/memory_stores\/[^/]+\/memories$/;
const SHA = 'a'.repeat(64);

/** A cursor the emulator accepts (it still decodes the page parameter before a rewrite runs). */
function cursor(tag: string): string {
  return Buffer.from(JSON.stringify({ after: `/~${tag}` }), 'utf8').toString('base64url');
}

function fakeMemory(storeId: string, p: string, content: string | null = null): Record<string, unknown> {
  return {
    type: 'memory',
    id: `mem_${Buffer.from(p).toString('hex').slice(0, 24)}`,
    path: p,
    content,
    content_sha256: SHA,
    content_size_bytes: content?.length ?? 0,
    memory_store_id: storeId,
    memory_version_id: 'memver_x',
    created_at: '2026-01-01T00:00:00Z',
    updated_at: '2026-01-01T00:00:00Z',
  };
}

async function limitOf(p: Promise<unknown>): Promise<RemoteLimitError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof RemoteLimitError) return e;
    throw e;
  }
  throw new Error('no limit hit');
}

async function rig(): Promise<{ storeId: string; remote: RemoteStore; listings: () => number }> {
  const store = await h.emu.createMemoryStore({ name: 'Bounds', memories: { '/a.md': 'a' } });
  const { client } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
  const mark = h.emu.requests.length;
  return {
    storeId: store.id,
    remote: new RemoteStore(client, store.id, { readRetries: 0 }),
    listings: () => h.emu.requests.slice(mark).filter((r) => r.route === 'GET /v1/memory_stores/:id/memories').length,
  };
}

describe('a listing', () => {
  it('stops at a cursor it has seen before', async () => {
    const r = await rig();
    h.emu.faults.add({ route: LISTING, rewrite: (b) => ({ ...(b as object), next_page: cursor('same') }) });
    const err = await limitOf(r.remote.listBasic());
    expect(err.code).toBe('MAW_REMOTE_LIMIT');
    expect(err.limit).toBe('repeated-cursor');
    expect(err.storeId).toBe(r.storeId);
    expect(err.message).toContain(r.storeId);
    expect(err.message).toContain('base URL');
    expect(r.listings()).toBe(2);
  });

  it('whose next_page never ends stops after the pages a full store can fill, not thousands of requests', async () => {
    const r = await rig();
    let n = 0;
    h.emu.faults.add({ route: LISTING, rewrite: () => ({ data: [], next_page: cursor(String(n++)) }) });
    const err = await limitOf(r.remote.listBasic());
    expect(err.limit).toBe('page-count');
    expect(r.listings()).toBeLessThanOrEqual(60);
  });

  it(`stops past ${MAX_LISTED_MEMORIES} memories (the store cap plus slack)`, async () => {
    const r = await rig();
    let page = 0;
    h.emu.faults.add({
      route: LISTING,
      rewrite: () => {
        page++;
        return { data: Array.from({ length: 100 }, (_, i) => fakeMemory(r.storeId, `/p${page}/m${i}.md`)), next_page: cursor(`c${page}`) };
      },
    });
    const err = await limitOf(r.remote.listBasic());
    expect(err.limit).toBe('memory-count');
    expect(r.listings()).toBe(Math.ceil((MAX_LISTED_MEMORIES + 1) / 100));
  });

  it('refuses a listing that names one path twice', async () => {
    const r = await rig();
    h.emu.faults.add({
      route: LISTING,
      rewrite: () => ({ data: [fakeMemory(r.storeId, '/x.md'), fakeMemory(r.storeId, '/x.md')], next_page: null }),
    });
    expect((await limitOf(r.remote.listBasic())).limit).toBe('duplicate-path');
  });

  it.each([
    { description: 'a body that is not JSON', body: '{"data": [' },
    { description: 'a page without a data array', body: { data: { not: 'an array' }, next_page: null } },
    { description: 'a memory without a sha', body: { data: [{ type: 'memory', id: 'mem_1', path: '/a.md' }], next_page: null } },
    { description: 'a next_page that is a number', body: { data: [], next_page: 7 } },
  ])('refuses $description as malformed', async ({ body }) => {
    const r = await rig();
    h.emu.faults.add({ route: LISTING, rewrite: () => body });
    expect((await limitOf(r.remote.listBasic())).limit).toBe('malformed');
  });

  it('never reads a page body past what its memories can weigh', async () => {
    const r = await rig();
    const huge = 'x'.repeat(100_000);
    h.emu.faults.add({
      route: LISTING,
      rewrite: () => ({ data: Array.from({ length: 200 }, (_, i) => fakeMemory(r.storeId, `/h${i}.md`, huge)), next_page: null }),
    });
    const err = await limitOf(r.remote.listFull(undefined, () => {}));
    expect(err.limit).toBe('body-size');
  });
});

describe('paging', () => {
  it('asks for the next page before handing on the items of this one, and stops asking once a handler fails', async () => {
    const memories: Record<string, string> = {};
    for (let i = 0; i < 45; i++) memories[`/n${String(i).padStart(2, '0')}.md`] = `n${i}`;
    const store = await h.emu.createMemoryStore({ name: 'Paged', memories });
    const { client } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const mark = h.emu.requests.length;
    const listings = (): number => h.emu.requests.slice(mark).filter((r) => r.route === 'GET /v1/memory_stores/:id/memories').length;
    const seenAtFirstItem: number[] = [];
    const got: string[] = [];
    await new RemoteStore(client, store.id).listFull(undefined, async (m) => {
      if (got.length === 0) {
        // The second page is asked for while the first one's items are still being handled.
        for (let i = 0; i < 250 && listings() < 2; i++) await new Promise((r) => setTimeout(r, 20));
        seenAtFirstItem.push(listings());
      }
      got.push(m.path);
    });
    expect(seenAtFirstItem).toEqual([2]);
    expect(got).toHaveLength(45);
    expect(listings()).toBe(3);

    const before = listings();
    const err = await new RemoteStore(client, store.id)
      .listFull(undefined, () => {
        throw new Error('handler failed');
      })
      .catch((e: unknown) => e);
    expect((err as Error).message).toBe('handler failed');
    await new Promise((r) => setTimeout(r, 200));
    // The first page, and at most the one asked ahead: no page after a failure.
    expect(listings() - before).toBeLessThanOrEqual(2);
  });
});

describe('a folder-split listing', () => {
  const split = { parallel: 4 };
  const collect = (r: { remote: RemoteStore }) => {
    const got: string[] = [];
    return { got, run: () => r.remote.listFull(undefined, (m) => void got.push(`${m.path}=${listedText(m.content)}`), undefined, split) };
  };
  /**
   * Answer the depth-1 listing with `top`, each folder's listing with `folder(prefix, page)`, and
   * the first page of the whole store with `whole` (by default a page saying more follow, so the
   * split is used).
   */
  function answer(
    top: () => unknown,
    folder: (prefix: string, page: number) => unknown,
    whole: () => unknown = () => ({ data: [], next_page: cursor('whole') }),
  ): void {
    const pages = new Map<string, number>();
    h.emu.faults.add({
      route: LISTING,
      rewrite: (_b, req) => {
        if (req.query.get('depth') === '1') return top();
        if (!req.query.has('path_prefix')) return whole();
        const prefix = req.query.get('path_prefix') ?? '';
        const page = (pages.get(prefix) ?? 0) + 1;
        pages.set(prefix, page);
        return folder(prefix, page);
      },
    });
  }
  const prefixItem = (p: unknown) => ({ type: 'memory_prefix', path: p });

  it('lists every memory once with its content: the store at depth 1, then each top-level folder on its own cursor', async () => {
    const memories: Record<string, string> = { '/top.md': 'top' };
    for (let i = 0; i < 45; i++) memories[`/f${i % 3}/n${String(i).padStart(2, '0')}.md`] = `n${i}`;
    const store = await h.emu.createMemoryStore({ name: 'Split', memories });
    const { client } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const mark = h.emu.requests.length;
    const got: string[] = [];
    await new RemoteStore(client, store.id).listFull(
      undefined,
      (m) => void got.push(`${m.path}=${listedText(m.content)}`),
      undefined,
      split,
    );
    expect(got.sort()).toEqual(
      Object.entries(memories)
        .map(([p, c]) => `${p}=${c}`)
        .sort(),
    );
    const queries = h.emu.requests
      .slice(mark)
      .filter((r) => r.route === 'GET /v1/memory_stores/:id/memories')
      .map((r) => r.query);
    // The whole store's first page (more than one page: dropped) and the depth-1 page, asked at once.
    expect(
      queries
        .slice(0, 2)
        .map((q) => `${q['path_prefix'] ?? '(whole)'} ${q['depth'] ?? ''}`)
        .sort(),
    ).toEqual(['(whole) ', '/ 1']);
    // 15 memories per folder: one full page each.
    expect(
      queries
        .slice(2)
        .map((q) => q['path_prefix'])
        .sort(),
    ).toEqual(['/f0/', '/f1/', '/f2/']);
  });

  describe('of a store that fits one page', () => {
    it("takes one round trip: the whole store's first page, asked at once with the depth-1 page, is complete and is the listing", async () => {
      const memories: Record<string, string> = {};
      for (let i = 0; i < 5; i++) memories[`/f${i}/n${i}.md`] = `n${i}`;
      const store = await h.emu.createMemoryStore({ name: 'Small', memories });
      const { client } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
      // Every listing answer takes 400 ms: a request sent after another's answer could not start
      // inside its window.
      h.emu.faults.add({ route: LISTING, latencyMs: 400 });
      const mark = h.emu.requests.length;
      const got: string[] = [];
      await new RemoteStore(client, store.id).listFull(
        undefined,
        (m) => void got.push(`${m.path}=${listedText(m.content)}`),
        undefined,
        split,
      );
      expect(got.sort()).toEqual(
        Object.entries(memories)
          .map(([p, c]) => `${p}=${c}`)
          .sort(),
      );
      const lists = h.emu.requests.slice(mark).filter((r) => r.route === 'GET /v1/memory_stores/:id/memories');
      expect(lists.map((r) => `${r.query['path_prefix'] ?? '(whole)'} ${r.query['depth'] ?? ''}`).sort()).toEqual(['(whole) ', '/ 1']);
      // Both asked before either was answered.
      expect(Math.max(...lists.map((r) => r.startedAt))).toBeLessThan(Math.min(...lists.map((r) => r.startedAt + r.ms)));
    });

    it('refuses a path it lists twice', async () => {
      const r = await rig();
      answer(
        () => ({ data: [], next_page: null }),
        () => ({ data: [], next_page: null }),
        () => ({ data: [fakeMemory(r.storeId, '/a/x.md', 'x'), fakeMemory(r.storeId, '/a/x.md', 'y')], next_page: null }),
      );
      expect((await limitOf(collect(r).run())).limit).toBe('duplicate-path');
    });

    it.each([
      { description: 'a body that is not JSON', body: '{"data": [' },
      { description: 'a memory without a sha', body: { data: [{ type: 'memory', id: 'mem_1', path: '/a.md' }], next_page: null } },
      { description: 'a page without a data array', body: { data: 'none', next_page: null } },
    ])('refuses $description as malformed, whatever the depth-1 page says', async ({ body }) => {
      const r = await rig();
      answer(
        () => ({ data: [fakeMemory(r.storeId, '/ok.md', 'ok')], next_page: null }),
        () => ({ data: [], next_page: null }),
        () => body,
      );
      expect((await limitOf(collect(r).run())).limit).toBe('malformed');
    });

    it('lists no folder on its own once the whole store came in one page', async () => {
      const r = await rig();
      const folders: string[] = [];
      answer(
        () => ({ data: [prefixItem('/a/'), prefixItem('/b/')], next_page: null }),
        (prefix) => {
          folders.push(prefix);
          return { data: [], next_page: null };
        },
        () => ({ data: [fakeMemory(r.storeId, '/a/x.md', 'x'), fakeMemory(r.storeId, '/b/y.md', 'y')], next_page: null }),
      );
      const c = collect(r);
      await c.run();
      expect(c.got.sort()).toEqual(['/a/x.md=x', '/b/y.md=y']);
      expect(folders).toEqual([]);
      expect(r.listings()).toBe(2);
    });
  });

  it(`stops past ${MAX_LISTED_MEMORIES} memories counted across the folders`, async () => {
    const r = await rig();
    answer(
      () => ({ data: Array.from({ length: 20 }, (_, i) => prefixItem(`/d${i}/`)), next_page: null }),
      (prefix, page) => ({
        data: Array.from({ length: 20 }, (_, i) => fakeMemory(r.storeId, `${prefix}p${page}-${i}.md`)),
        next_page: cursor(`${prefix}${page}`),
      }),
    );
    const err = await limitOf(collect(r).run());
    expect(err.limit).toBe('memory-count');
    expect(r.listings()).toBeLessThan(MAX_LISTED_MEMORIES / 20 + 30);
  });

  it('refuses one path listed by two folders as a duplicate', async () => {
    const r = await rig();
    answer(
      () => ({ data: [prefixItem('/a/'), prefixItem('/b/')], next_page: null }),
      () => ({ data: [fakeMemory(r.storeId, '/a/same.md', 'x')], next_page: null }),
    );
    expect((await limitOf(collect(r).run())).limit).toBe('duplicate-path');
  });

  it('stops folders whose next_page never ends at one page budget shared by all of them', async () => {
    const r = await rig();
    let n = 0;
    answer(
      () => ({ data: Array.from({ length: 10 }, (_, i) => prefixItem(`/d${i}/`)), next_page: null }),
      () => ({ data: [], next_page: cursor(String(n++)) }),
    );
    const err = await limitOf(collect(r).run());
    expect(err.limit).toBe('page-count');
    // The budget of one cursor plus one page per folder, and the pages in flight when it ran out.
    expect(r.listings()).toBeLessThanOrEqual(Math.ceil(MAX_LISTED_MEMORIES / 20) * 2 + 10 + 10 + split.parallel);
  });

  it('stops a depth-1 listing that never ends', async () => {
    const r = await rig();
    let n = 0;
    answer(
      () => ({ data: [], next_page: cursor(`top${n++}`) }),
      () => ({ data: [], next_page: null }),
    );
    expect((await limitOf(collect(r).run())).limit).toBe('page-count');
    expect(r.listings()).toBeLessThanOrEqual(Math.ceil(MAX_LISTED_MEMORIES / 20) * 2 + 10);
  });

  it.each([
    { description: 'a folder item two levels deep', item: prefixItem('/a/b/'), limit: 'malformed' },
    { description: 'a folder item without a trailing slash', item: prefixItem('/a'), limit: 'malformed' },
    { description: 'a folder item without a path', item: { type: 'memory_prefix' }, limit: 'malformed' },
  ])('refuses $description', async ({ item, limit }) => {
    const r = await rig();
    answer(
      () => ({ data: [item], next_page: null }),
      () => ({ data: [], next_page: null }),
    );
    expect((await limitOf(collect(r).run())).limit).toBe(limit);
  });

  it('refuses a folder named twice', async () => {
    const r = await rig();
    answer(
      () => ({ data: [prefixItem('/a/'), prefixItem('/a/')], next_page: null }),
      () => ({ data: [], next_page: null }),
    );
    expect((await limitOf(collect(r).run())).limit).toBe('duplicate-path');
  });
});

describe('a memory over the size limit', () => {
  it('is refused by retrieve', async () => {
    const r = await rig();
    const id = h.emu.memory(r.storeId, '/a.md')!.id;
    h.emu.faults.add({ route: /memories\/mem_/, rewrite: (b) => ({ ...(b as object), content: 'y'.repeat(150_000) }) });
    const err = await limitOf(r.remote.retrieve(id));
    expect(err.limit).toBe('body-size');
    expect(err.message).toContain('/a.md');
  });

  it('is left out of the mount with a warning naming it, and the other memories mount', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Oversized', memories: { '/ok.md': 'ok', '/big.md': 'small for now' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    h.emu.faults.add({
      route: LISTING,
      rewrite: (b) => {
        const body = b as { data: Array<Record<string, unknown>> };
        return { ...body, data: body.data.map((m) => (m['path'] === '/big.md' ? { ...m, content: 'z'.repeat(150_000) } : m)) };
      },
    });
    const log = captureLogger();
    const mounted = await new MemoryMounter({ client, logger: log.logger }).mount(session);
    const root = mounted.roots[0]!;
    expect(await fsp.readFile(path.join(root, 'ok.md'), 'utf8')).toBe('ok');
    expect(fs.existsSync(path.join(root, 'big.md'))).toBe(false);
    const warning = log.lines.find((l) => l.level >= 40 && l['path'] === '/big.md');
    expect(String(warning?.['reason'])).toContain('over the 102400-byte limit');
    await mounted.unmount();
  });
});

describe('a mount whose listing never ends', () => {
  it('fails with a mount error caused by the limit, and removes its folder', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Endless', memories: { '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    let n = 0;
    h.emu.faults.add({ route: LISTING, rewrite: () => ({ data: [], next_page: cursor(String(n++)) }) });
    const err = await new MemoryMounter({ client }).mount(session).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MemoryMountError);
    expect((err as MemoryMountError).cause).toBeInstanceOf(RemoteLimitError);
    expect((err as Error).message).toContain(store.id);
    expect(n).toBeLessThan(300);
    expect(fs.existsSync(path.join(h.mountRoot, 'endless'))).toBe(false);
  });
});
