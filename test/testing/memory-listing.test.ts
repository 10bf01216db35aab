/**
 * Pins how the emulator lists memories: page caps per view (basic 100, full 20), cursor
 * pagination that visits every memory once in ascending path order, `path_prefix` whole-segment
 * matching, and `depth` with `memory_prefix` roll-ups.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { expectApiError } from './helpers.js';

let emu: Emulator;
let client: Anthropic;
let bigStore: string;

const bigMemories: Record<string, string> = {};
for (let i = 0; i < 250; i++) bigMemories[`/m/${String(i).padStart(3, '0')}.md`] = `content ${i}`;

beforeAll(async () => {
  emu = await startEmulator({ mountRoot: '/nonexistent-mount-root' });
  client = emu.client({ maxRetries: 0 });
  bigStore = (await emu.createMemoryStore({ name: 'Big', memories: bigMemories })).id;
});
afterAll(async () => {
  await emu.close();
});

const listRoute = 'GET /v1/memory_stores/:id/memories';

describe('pagination', () => {
  it.each([
    { description: 'basic view, limit 100', view: 'basic' as const, limit: 100, pageSize: 100, pages: 3 },
    { description: 'basic view, limit above the cap is clamped to 100', view: 'basic' as const, limit: 500, pageSize: 100, pages: 3 },
    { description: 'full view, limit above the cap is clamped to 20', view: 'full' as const, limit: 100, pageSize: 20, pages: 13 },
    { description: 'full view, limit 7', view: 'full' as const, limit: 7, pageSize: 7, pages: 36 },
  ])('$description visits all 250 memories once, in path order', async ({ view, limit, pageSize, pages }) => {
    emu.clearRequests();
    const seen: string[] = [];
    let page = await client.beta.memoryStores.memories.list(bigStore, { view, limit });
    expect(page.data.length).toBe(pageSize);
    for (;;) {
      for (const item of page.data) {
        if (item.type !== 'memory') throw new Error('unexpected prefix');
        seen.push(item.path);
        expect(item.content).toBe(view === 'full' ? bigMemories[item.path] : null);
      }
      if (!page.hasNextPage()) break;
      page = await page.getNextPage();
    }
    expect(seen).toEqual(Object.keys(bigMemories).sort());
    expect(emu.requests.filter((r) => r.route === listRoute)).toHaveLength(pages);
  });

  it('defaults to the basic view', async () => {
    const page = await client.beta.memoryStores.memories.list(bigStore, { limit: 3 });
    expect(page.data.every((m) => m.type === 'memory' && m.content === null)).toBe(true);
  });

  it('keeps paging correctly when a memory before the cursor is deleted between pages', async () => {
    const storeId = (await emu.createMemoryStore({ name: 'Shifting', memories: { '/a': '', '/b': '', '/c': '', '/d': '' } })).id;
    const first = await client.beta.memoryStores.memories.list(storeId, { limit: 2 });
    emu.removeMemory(storeId, '/a');
    const second = await first.getNextPage();
    expect(second.data.map((m) => m.path)).toEqual(['/c', '/d']);
  });

  it('refuses a page cursor it did not issue', async () => {
    await expectApiError(client.beta.memoryStores.memories.list(bigStore, { page: 'garbage' }), 400, 'invalid_request_error');
  });
});

describe('path_prefix and depth', () => {
  let storeId: string;
  beforeAll(async () => {
    storeId = (
      await emu.createMemoryStore({
        name: 'Tree',
        memories: {
          '/top.md': '',
          '/notes/todo.md': '',
          '/notes/ideas/one.md': '',
          '/notes/ideas/deep/two.md': '',
          '/notes/journal/2024.md': '',
          '/notes-archive/old.md': '',
        },
      })
    ).id;
  });

  async function listAll(params: { path_prefix?: string; depth?: number }): Promise<string[]> {
    const out: string[] = [];
    for await (const item of client.beta.memoryStores.memories.list(storeId, { limit: 2, ...params })) {
      out.push(`${item.type === 'memory_prefix' ? 'prefix' : 'memory'} ${item.path}`);
    }
    return out;
  }

  it.each([
    {
      description: 'a prefix matches whole segments only',
      params: { path_prefix: '/notes/' },
      expected: ['memory /notes/ideas/deep/two.md', 'memory /notes/ideas/one.md', 'memory /notes/journal/2024.md', 'memory /notes/todo.md'],
    },
    {
      description: 'depth 1 at the root rolls sub-folders up into prefixes',
      params: { depth: 1 },
      expected: ['prefix /notes-archive/', 'prefix /notes/', 'memory /top.md'],
    },
    {
      description: 'depth 1 below a prefix lists direct children and one prefix per sub-folder',
      params: { path_prefix: '/notes/', depth: 1 },
      expected: ['prefix /notes/ideas/', 'prefix /notes/journal/', 'memory /notes/todo.md'],
    },
    {
      description: 'depth 2 reaches one level further',
      params: { path_prefix: '/notes/', depth: 2 },
      expected: ['prefix /notes/ideas/deep/', 'memory /notes/ideas/one.md', 'memory /notes/journal/2024.md', 'memory /notes/todo.md'],
    },
    { description: 'a prefix with no memories lists nothing', params: { path_prefix: '/nothing/' }, expected: [] },
  ])('$description', async ({ params, expected }) => {
    expect(await listAll(params)).toEqual(expected);
  });

  it('refuses a path_prefix that does not end in a slash', async () => {
    await expectApiError(client.beta.memoryStores.memories.list(storeId, { path_prefix: '/notes' }), 400, 'invalid_request_error');
  });
});
