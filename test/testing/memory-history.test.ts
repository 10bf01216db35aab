/**
 * Pins the store's write history: every create, update and delete, over HTTP or as a Console edit,
 * in order with the content it left; a write that changed nothing is no entry, and a refused write
 * is none either.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { sha256Hex } from '../../src/testing/emulator/model/memory-store.js';

let emu: Emulator;
let client: Anthropic;

beforeEach(async () => {
  emu = await startEmulator({ mountRoot: '/nonexistent-mount-root' });
  client = emu.client({ maxRetries: 0 });
});
afterEach(async () => {
  await emu.close();
});

describe('memoryHistory', () => {
  it('lists API writes and Console edits in order, with the content each left', async () => {
    const store = await emu.createMemoryStore({ name: 'H', memories: { '/seed.md': 'seed' } });
    const created = await client.beta.memoryStores.memories.create(store.id, { path: '/a.md', content: 'one' });
    emu.putMemory(store.id, '/a.md', 'two');
    await client.beta.memoryStores.memories.update(created.id, { memory_store_id: store.id, path: '/b.md' });
    await client.beta.memoryStores.memories.delete(created.id, { memory_store_id: store.id });

    expect(emu.memoryHistory(store.id)).toEqual([
      { seq: 1, op: 'create', memoryId: expect.any(String), path: '/seed.md', content: 'seed', sha256: sha256Hex('seed') },
      { seq: 2, op: 'create', memoryId: created.id, path: '/a.md', content: 'one', sha256: sha256Hex('one') },
      { seq: 3, op: 'update', memoryId: created.id, path: '/a.md', content: 'two', sha256: sha256Hex('two') },
      { seq: 4, op: 'update', memoryId: created.id, path: '/b.md', content: 'two', sha256: sha256Hex('two') },
      { seq: 5, op: 'delete', memoryId: created.id, path: '/b.md', content: null, sha256: null },
    ]);
  });

  it('records no entry for a write that changed nothing or was refused', async () => {
    const store = await emu.createMemoryStore({ name: 'H', memories: { '/a.md': 'same' } });
    const id = emu.memory(store.id, '/a.md')!.id;
    await client.beta.memoryStores.memories.update(id, {
      memory_store_id: store.id,
      content: 'same',
      precondition: { type: 'content_sha256', content_sha256: sha256Hex('other') },
    });
    await expect(client.beta.memoryStores.memories.create(store.id, { path: '/a.md', content: 'dup' })).rejects.toMatchObject({
      status: 409,
    });
    expect(emu.memoryHistory(store.id).map((w) => w.op)).toEqual(['create']);
  });

  it('returns copies: changing one changes nothing in the emulator', async () => {
    const store = await emu.createMemoryStore({ name: 'H', memories: { '/a.md': 'x' } });
    emu.memoryHistory(store.id)[0]!.content = 'changed';
    expect(emu.memoryHistory(store.id)[0]!.content).toBe('x');
  });
});
