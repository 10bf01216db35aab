/**
 * Pins the memory endpoint rules of the emulator, driven through the real SDK client:
 * content_sha256 / size / version ids, update and delete preconditions (with the
 * identical-content exception), path validity and overlap conflicts, the content and
 * memory-count limits, 404s, and the archived-store refusal.
 */
import { createHash } from 'node:crypto';
import type Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { errorBody, expectApiError } from './helpers.js';

const sha = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');

let emu: Emulator;
let client: Anthropic;

beforeAll(async () => {
  emu = await startEmulator({ mountRoot: '/nonexistent-mount-root', maxContentBytes: 1000, maxMemoriesPerStore: 5 });
  client = emu.client({ maxRetries: 0 });
});
afterAll(async () => {
  await emu.close();
});

async function newStore(memories: Record<string, string> = {}): Promise<string> {
  return (await emu.createMemoryStore({ name: 'Rules', memories })).id;
}

describe('memory stores', () => {
  it('are created, retrieved and listed over HTTP with the console key, page by page, archived ones only on request', async () => {
    const created = await client.beta.memoryStores.create({ name: 'Made over HTTP', description: 'by a test', metadata: { team: 'qa' } });
    expect(created).toMatchObject({
      type: 'memory_store',
      name: 'Made over HTTP',
      description: 'by a test',
      metadata: { team: 'qa' },
      archived_at: null,
    });
    expect(created.id).toMatch(/^memstore_/);
    expect(await client.beta.memoryStores.retrieve(created.id)).toEqual(created);
    const archived = await client.beta.memoryStores.create({ name: 'Archived over HTTP' });
    await client.beta.memoryStores.archive(archived.id);
    const later = [(await client.beta.memoryStores.create({ name: 'Second' })).id, await newStore()];
    const listed = async (params: { limit: number; include_archived?: boolean }): Promise<string[]> => {
      const ids: string[] = [];
      for await (const store of client.beta.memoryStores.list(params)) ids.push(store.id);
      return ids;
    };
    const mark = emu.requests.length;
    const active = await listed({ limit: 1 });
    expect(active).toEqual(expect.arrayContaining([created.id, ...later]));
    expect(active).not.toContain(archived.id);
    expect(new Set(active).size).toBe(active.length);
    // One store per page: one listing request per store (the last page says there is no next).
    expect(emu.requests.slice(mark).filter((r) => r.route === 'GET /v1/memory_stores')).toHaveLength(active.length);
    const all = await listed({ limit: 2, include_archived: true });
    expect(all).toEqual(expect.arrayContaining([...active, archived.id]));
    expect(all).toHaveLength(active.length + 1);
  });

  it('refuses a create body the API refuses with 400 invalid_request_error', async () => {
    await expectApiError(client.beta.memoryStores.create({ name: '' }), 400, 'invalid_request_error');
  });
});

describe('memory objects', () => {
  it('carries the sha256 and byte size of the exact UTF-8 content', async () => {
    const storeId = await newStore();
    const content = 'héllo – 世界\r\n';
    const created = await client.beta.memoryStores.memories.create(storeId, { path: '/a.md', content });
    expect(created.content_sha256).toBe(sha(content));
    expect(created.content_size_bytes).toBe(Buffer.byteLength(content, 'utf8'));
    expect(created.content).toBeNull();
    expect(created.memory_store_id).toBe(storeId);
    expect(created.type).toBe('memory');
    const full = await client.beta.memoryStores.memories.retrieve(created.id, { memory_store_id: storeId });
    expect(full.content).toBe(content);
    expect(full.memory_version_id).toBe(created.memory_version_id);
  });

  it('gives every write a new memory_version_id and keeps the id across a rename', async () => {
    const storeId = await newStore();
    const a = await client.beta.memoryStores.memories.create(storeId, { path: '/a.md', content: 'one' });
    const b = await client.beta.memoryStores.memories.update(a.id, { memory_store_id: storeId, content: 'two' });
    const c = await client.beta.memoryStores.memories.update(a.id, { memory_store_id: storeId, path: '/b.md' });
    expect(new Set([a.memory_version_id, b.memory_version_id, c.memory_version_id]).size).toBe(3);
    expect(c.id).toBe(a.id);
    expect(emu.memories(storeId)).toEqual({ '/b.md': 'two' });
  });
});

describe('update preconditions', () => {
  it('applies an update whose content_sha256 matches the current content', async () => {
    const storeId = await newStore({ '/p.md': 'v1' });
    const id = emu.memory(storeId, '/p.md')!.id;
    const updated = await client.beta.memoryStores.memories.update(id, {
      memory_store_id: storeId,
      content: 'v2',
      precondition: { type: 'content_sha256', content_sha256: sha('v1') },
    });
    expect(updated.content_sha256).toBe(sha('v2'));
    expect(emu.memories(storeId)['/p.md']).toBe('v2');
  });

  it('refuses a stale precondition with 409 memory_precondition_failed_error and x-should-retry false', async () => {
    const storeId = await newStore({ '/p.md': 'v1' });
    const id = emu.memory(storeId, '/p.md')!.id;
    emu.putMemory(storeId, '/p.md', 'console edit');
    const before = emu.requests.length;
    const err = await expectApiError(
      client.beta.memoryStores.memories.update(id, {
        memory_store_id: storeId,
        content: 'agent edit',
        precondition: { type: 'content_sha256', content_sha256: sha('v1') },
      }),
      409,
      'memory_precondition_failed_error',
    );
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(emu.requests.length - before).toBe(1);
    expect(emu.memories(storeId)['/p.md']).toBe('console edit');
  });

  it('succeeds despite a stale precondition when the memory already holds exactly that content and path', async () => {
    const storeId = await newStore({ '/p.md': 'same' });
    const id = emu.memory(storeId, '/p.md')!.id;
    const version = emu.memory(storeId, '/p.md')!.memory_version_id;
    const result = await client.beta.memoryStores.memories.update(id, {
      memory_store_id: storeId,
      content: 'same',
      precondition: { type: 'content_sha256', content_sha256: sha('an older content') },
    });
    expect(result.content_sha256).toBe(sha('same'));
    expect(result.memory_version_id).toBe(version);
  });

  it('checks the precondition against the current content when renaming', async () => {
    const storeId = await newStore({ '/p.md': 'now' });
    const id = emu.memory(storeId, '/p.md')!.id;
    await expectApiError(
      client.beta.memoryStores.memories.update(id, {
        memory_store_id: storeId,
        path: '/q.md',
        precondition: { type: 'content_sha256', content_sha256: sha('before') },
      }),
      409,
      'memory_precondition_failed_error',
    );
    expect(Object.keys(emu.memories(storeId))).toEqual(['/p.md']);
  });
});

describe('delete preconditions', () => {
  it('deletes when expected_content_sha256 matches and refuses (nothing deleted) when it does not', async () => {
    const storeId = await newStore({ '/d.md': 'x', '/e.md': 'y' });
    const d = emu.memory(storeId, '/d.md')!.id;
    const e = emu.memory(storeId, '/e.md')!.id;
    const deleted = await client.beta.memoryStores.memories.delete(d, { memory_store_id: storeId, expected_content_sha256: sha('x') });
    expect(deleted).toMatchObject({ id: d, type: 'memory_deleted' });
    await expectApiError(
      client.beta.memoryStores.memories.delete(e, { memory_store_id: storeId, expected_content_sha256: sha('not y') }),
      409,
      'memory_precondition_failed_error',
    );
    expect(emu.memories(storeId)).toEqual({ '/e.md': 'y' });
  });

  it('answers 404 not_found_error for a memory that does not exist', async () => {
    const storeId = await newStore();
    await expectApiError(client.beta.memoryStores.memories.delete('mem_missing', { memory_store_id: storeId }), 404, 'not_found_error');
    await expectApiError(client.beta.memoryStores.memories.retrieve('mem_missing', { memory_store_id: storeId }), 404, 'not_found_error');
    await expectApiError(
      client.beta.memoryStores.memories.update('mem_missing', { memory_store_id: storeId, content: 'x' }),
      404,
      'not_found_error',
    );
  });
});

describe('paths', () => {
  it.each([
    { description: 'no leading slash', path: 'a.md' },
    { description: 'trailing slash', path: '/notes/' },
    { description: 'empty segment', path: '/a//b.md' },
    { description: 'dot segment', path: '/a/./b.md' },
    { description: 'dot-dot segment', path: '/a/../b.md' },
    { description: 'control character', path: '/a\u0001.md' },
    { description: 'line separator', path: '/a\u2028.md' },
    { description: 'zero-width format character', path: '/a\u200b.md' },
    { description: 'not NFC', path: '/cafe\u0301.md' },
    { description: 'over 1024 bytes', path: `/${'x'.repeat(1024)}` },
    { description: 'over 1024 UTF-8 bytes in fewer characters', path: `/${'é'.repeat(512)}` },
    { description: 'more than 20 segments', path: `/${Array.from({ length: 21 }, () => 'd').join('/')}` },
  ])('refuses a path with $description as 400 invalid_request_error', async ({ path }) => {
    const storeId = await newStore();
    await expectApiError(client.beta.memoryStores.memories.create(storeId, { path, content: 'x' }), 400, 'invalid_request_error');
    expect(emu.memories(storeId)).toEqual({});
  });

  it('accepts a path of exactly 1024 UTF-8 bytes', async () => {
    const storeId = await newStore();
    const longest = `/${'é'.repeat(511)}x`;
    expect(Buffer.byteLength(longest, 'utf8')).toBe(1024);
    await client.beta.memoryStores.memories.create(storeId, { path: longest, content: 'x' });
    expect(Object.keys(emu.memories(storeId))).toEqual([longest]);
  });

  it('treats paths case-sensitively', async () => {
    const storeId = await newStore({ '/Notes.md': 'upper' });
    await client.beta.memoryStores.memories.create(storeId, { path: '/notes.md', content: 'lower' });
    expect(emu.memories(storeId)).toEqual({ '/Notes.md': 'upper', '/notes.md': 'lower' });
  });

  it.each([
    { description: 'the same path', existing: '/notes/todo.md', path: '/notes/todo.md' },
    { description: 'an ancestor of an existing memory', existing: '/notes/todo.md', path: '/notes' },
    { description: 'a descendant of an existing memory', existing: '/notes', path: '/notes/todo.md' },
  ])('answers 409 memory_path_conflict_error naming the other memory for $description', async ({ existing, path }) => {
    const storeId = await newStore({ [existing]: 'x' });
    const other = emu.memory(storeId, existing)!;
    const err = await expectApiError(
      client.beta.memoryStores.memories.create(storeId, { path, content: 'y' }),
      409,
      'memory_path_conflict_error',
    );
    expect(errorBody(err)).toMatchObject({ conflicting_memory_id: other.id, conflicting_path: existing });
    expect(err.headers?.get('x-should-retry')).toBe('false');
  });

  it('does not treat a sibling sharing a name prefix as overlapping', async () => {
    const storeId = await newStore({ '/notes/a.md': 'x' });
    await client.beta.memoryStores.memories.create(storeId, { path: '/notes-archive/a.md', content: 'y' });
    expect(Object.keys(emu.memories(storeId))).toEqual(['/notes-archive/a.md', '/notes/a.md']);
  });

  it('refuses a rename onto another memory path', async () => {
    const storeId = await newStore({ '/a.md': 'a', '/b.md': 'b' });
    const a = emu.memory(storeId, '/a.md')!.id;
    await expectApiError(
      client.beta.memoryStores.memories.update(a, { memory_store_id: storeId, path: '/b.md' }),
      409,
      'memory_path_conflict_error',
    );
  });
});

describe('limits', () => {
  it('refuses content over the byte cap with 413, counting UTF-8 bytes', async () => {
    const storeId = await newStore();
    await client.beta.memoryStores.memories.create(storeId, { path: '/ok.md', content: 'x'.repeat(1000) });
    // 334 three-byte characters are 1002 bytes but only 334 UTF-16 units.
    await expectApiError(client.beta.memoryStores.memories.create(storeId, { path: '/big.md', content: '€'.repeat(334) }), 413);
    expect(Object.keys(emu.memories(storeId))).toEqual(['/ok.md']);
  });

  it('refuses a memory beyond the per-store count with 400 naming the limit', async () => {
    const storeId = await newStore({ '/1': '', '/2': '', '/3': '', '/4': '', '/5': '' });
    const err = await expectApiError(
      client.beta.memoryStores.memories.create(storeId, { path: '/6', content: '' }),
      400,
      'invalid_request_error',
    );
    expect(err.message).toContain('(5)');
  });

  it('refuses memory writes in an archived store but still serves reads and deletes', async () => {
    const storeId = await newStore({ '/keep.md': 'k', '/drop.md': 'd' });
    await client.beta.memoryStores.archive(storeId);
    await expectApiError(
      client.beta.memoryStores.memories.create(storeId, { path: '/new.md', content: 'n' }),
      400,
      'invalid_request_error',
    );
    const keep = emu.memory(storeId, '/keep.md')!.id;
    await expectApiError(client.beta.memoryStores.memories.update(keep, { memory_store_id: storeId, content: 'changed' }), 400);
    expect((await client.beta.memoryStores.memories.retrieve(keep, { memory_store_id: storeId })).content).toBe('k');
    await client.beta.memoryStores.memories.delete(emu.memory(storeId, '/drop.md')!.id, { memory_store_id: storeId });
    expect(emu.memories(storeId)).toEqual({ '/keep.md': 'k' });
  });

  it('archives the same way through emu.archiveMemoryStore as over HTTP: archived_at set, updated_at moved with it', async () => {
    const storeId = await newStore({ '/a.md': 'a' });
    await new Promise((r) => setTimeout(r, 5));
    emu.archiveMemoryStore(storeId);
    const store = await client.beta.memoryStores.retrieve(storeId);
    expect(store.archived_at).not.toBeNull();
    expect(store.updated_at).toBe(store.archived_at);
    await expectApiError(
      client.beta.memoryStores.memories.create(storeId, { path: '/new.md', content: 'n' }),
      400,
      'invalid_request_error',
    );
  });
});
