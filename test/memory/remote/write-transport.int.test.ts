/**
 * Pins the transport of memory writes and listings, over real HTTP against the emulator: every
 * request goes through the dispatcher the app chose (the client's `fetchOptions.dispatcher` here,
 * counted), listing pages read into pooled buffers and writes read whole by the page transport,
 * retrieves through the client's own `fetch`; and every write's answer is classified exactly as
 * before: 409s, 4xx refusals, 5xx, a lost response, a server that never answers (the request
 * timeout), an answer too large or malformed to be a memory, and the caller's abort. A client with
 * a `fetch` of its own keeps it for every request; a client of another copy of the SDK works the same.
 */
import Anthropic from '@anthropic-ai/sdk';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { withPageFetch } from '../../../src/api/page-fetch.js';
import { isAbortError } from '../../../src/internal/abort.js';
import { RemoteStore } from '../../../src/memory/remote/remote-store.js';
import { RecordingAgent } from '../../api/fixtures/recording-agent.js';
import { copySdk, importSdkCopy } from '../../api/sdk-copy.js';
import { harness, type Harness } from '../int-helpers.js';

type FetchOptions = NonNullable<ConstructorParameters<typeof Anthropic>[0]>['fetchOptions'];

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  vi.restoreAllMocks();
  await h.cleanup();
});

const WRITE = /^POST \/v1\/memory_stores\/[^/]+\/memories/;

async function rig(
  clientOptions: ConstructorParameters<typeof Anthropic>[0] = {},
  requestTimeoutMs?: number,
): Promise<{ storeId: string; remote: RemoteStore; client: Anthropic }> {
  const store = await h.emu.createMemoryStore({ name: 'Writes', memories: { '/a.md': 'a' } });
  const { sessionId } = await h.emu.createSession({ resources: [{ memoryStoreId: store.id }] });
  const client = h.emu.sessionClient(sessionId, clientOptions);
  return {
    storeId: store.id,
    client,
    remote: new RemoteStore(client, store.id, { readRetries: 0, ...(requestTimeoutMs !== undefined ? { requestTimeoutMs } : {}) }),
  };
}

describe('with the runtime default fetch', () => {
  it("writes, retrieves and listings all go through the client's dispatcher; listing pages through the page transport", async () => {
    const agent = new RecordingAgent();
    try {
      const r = await rig({ fetchOptions: { dispatcher: agent } as FetchOptions });
      const listed = await r.remote.listBasic();
      expect(listed.map((m) => m.path)).toEqual(['/a.md']);
      const a = listed.find((m) => m.path === '/a.md')!;
      expect((await r.remote.retrieve(a.id)).content).toBe('a');
      const created = await r.remote.create('/notes/new.md', 'hello', undefined);
      expect(created.ok).toBe(true);
      if (!created.ok) return;
      const updated = await r.remote.update(created.id, '/notes/new.md', 'hello again', created.sha, undefined);
      expect(updated.ok).toBe(true);
      expect(await r.remote.delete(a.id, a.sha, undefined)).toEqual({ ok: true });

      expect(h.emu.memories(r.storeId)).toEqual({ '/notes/new.md': 'hello again' });
      // Every request the emulator answered came through the app's dispatcher.
      const answered = h.emu.requests.filter((q) => q.route.includes('/memories'));
      expect(answered).toHaveLength(5);
      expect(agent.seen).toHaveLength(5);
      expect(agent.seen.map((s) => s.split(' ')[0])).toEqual(['GET', 'GET', 'POST', 'POST', 'DELETE']);
    } finally {
      await agent.close();
    }
  });

  it('keeps the connection open between writes', async () => {
    const r = await rig();
    for (let i = 0; i < 3; i++) expect((await r.remote.create(`/k${i}.md`, 'x', undefined)).ok).toBe(true);
    expect(Object.keys(h.emu.memories(r.storeId))).toHaveLength(4);
  });

  const rows: Array<{ description: string; fault: Parameters<Harness['emu']['faults']['add']>[0]; failure: string; reason?: RegExp }> = [
    {
      description: 'a 409 precondition failure is a precondition',
      fault: { status: 409, errorType: 'memory_precondition_failed_error' },
      failure: 'precondition',
    },
    {
      description: 'a 400 is a refusal, with the server message',
      fault: { status: 400, message: 'bad content' },
      failure: 'refused',
      reason: /HTTP 400.*bad content/,
    },
    { description: 'a 413 is a refusal', fault: { status: 413 }, failure: 'refused' },
    { description: 'a 404 is not-found', fault: { status: 404 }, failure: 'not-found' },
    { description: 'a 503 is transient', fault: { status: 503 }, failure: 'transient', reason: /HTTP 503/ },
    { description: 'a response lost after the write is a lost response', fault: { dropResponse: true }, failure: 'lost-response' },
    { description: 'an answer that is not JSON is a lost response', fault: { rewrite: () => '{"id": "mem_' }, failure: 'lost-response' },
    {
      description: 'an answer larger than any memory is a lost response, not read whole',
      fault: { rewrite: () => 'x'.repeat(2 * 1024 * 1024) },
      failure: 'lost-response',
    },
  ];
  it.each(rows)('$description', async ({ fault, failure, reason }) => {
    const r = await rig();
    h.emu.faults.add({ route: WRITE, ...fault });
    const res = await r.remote.create('/b.md', 'b', undefined);
    expect(res.ok).toBe(false);
    if (res.ok) return;
    expect(res.failure).toBe(failure);
    if (reason) expect(res.reason).toMatch(reason);
  });

  it('a server that never answers is a lost response once the request timeout passes', async () => {
    const r = await rig({}, 300);
    h.emu.faults.add({ route: WRITE, hang: true });
    const started = Date.now();
    const res = await r.remote.create('/b.md', 'b', undefined);
    expect(res.ok ? undefined : res.failure).toBe('lost-response');
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it("the caller's abort cancels the write in flight and is thrown, not recorded", async () => {
    const r = await rig();
    h.emu.faults.add({ route: WRITE, hang: true });
    const ctrl = new AbortController();
    const pending = r.remote.create('/b.md', 'b', ctrl.signal);
    await new Promise((resolve) => setTimeout(resolve, 100));
    ctrl.abort(new Error('bound expired'));
    const err = await pending.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeDefined();
    expect(isAbortError(err) || (err as Error).message === 'bound expired').toBe(true);
  });

  it('the copies of a client for its listings and writes are made once, and shared by every store of that client', async () => {
    const first = await h.emu.createMemoryStore({ name: 'One', memories: { '/a.md': 'a' } });
    const second = await h.emu.createMemoryStore({ name: 'Other', memories: { '/b.md': 'b' } });
    const { sessionId } = await h.emu.createSession({ resources: [{ memoryStoreId: first.id }, { memoryStoreId: second.id }] });
    const client = h.emu.sessionClient(sessionId);
    const copies = vi.spyOn(client, 'withOptions');
    const stores = [new RemoteStore(client, first.id), new RemoteStore(client, first.id), new RemoteStore(client, second.id)];
    for (const remote of stores) {
      await remote.listBasic();
      await remote.listFull(undefined, () => undefined);
      expect((await remote.create(`/new-${stores.indexOf(remote)}.md`, 'x', undefined)).ok).toBe(true);
    }
    // One for basic pages, one for full pages, one for writes: not three per store.
    expect(copies).toHaveBeenCalledTimes(3);
    // Another client (another timeout, too) gets copies of its own.
    const other = h.emu.sessionClient(sessionId);
    const otherCopies = vi.spyOn(other, 'withOptions');
    await new RemoteStore(other, second.id).listBasic();
    await new RemoteStore(other, second.id, { requestTimeoutMs: 5_000 }).listBasic();
    expect(otherCopies).toHaveBeenCalledTimes(2);
    expect(copies).toHaveBeenCalledTimes(3);
  });
});

describe('a client with a transport of its own', () => {
  it('keeps its own fetch for every request: listings, writes, retrieves', async () => {
    const calls: string[] = [];
    const own: typeof fetch = (input, init) => {
      calls.push(init?.method ?? 'GET');
      return fetch(input, init);
    };
    const r = await rig({ fetch: own });
    const listed = await r.remote.listBasic();
    await r.remote.listFull(undefined, () => undefined);
    expect((await r.remote.retrieve(listed[0]!.id)).content).toBe('a');
    expect((await r.remote.create('/c.md', 'c', undefined)).ok).toBe(true);
    expect(calls).toEqual(['GET', 'GET', 'GET', 'POST']);
    expect(withPageFetch(r.client, 1024, { lend: (n) => ({ bytes: Buffer.alloc(n), done: () => {} }), stallTimeoutMs: 1_000 })).toBe(
      r.client,
    );
  });

  it('keeps itself when it cannot be copied with another fetch', () => {
    const bare = { fetch: globalThis.fetch } as unknown as Anthropic;
    expect(withPageFetch(bare, 1024, { lend: (n) => ({ bytes: Buffer.alloc(n), done: () => {} }), stallTimeoutMs: 1_000 })).toBe(bare);
  });
});

describe('a client of another copy of the SDK', () => {
  it('lists and writes, and its failures are classified the same', async () => {
    const copy = await copySdk();
    try {
      const other = await importSdkCopy(copy);
      const store = await h.emu.createMemoryStore({ name: 'Other', memories: { '/a.md': 'a' } });
      const { sessionId } = await h.emu.createSession({ resources: [{ memoryStoreId: store.id }] });
      const token = h.emu.sessionsToken(sessionId)!;
      const client = new other.default({ apiKey: null, authToken: token, baseURL: h.emu.baseURL, logLevel: 'off' }) as unknown as Anthropic;
      const remote = new RemoteStore(client, store.id, { readRetries: 0 });
      expect((await remote.listBasic()).map((m) => m.path)).toEqual(['/a.md']);
      expect((await remote.create('/b.md', 'b', undefined)).ok).toBe(true);
      h.emu.faults.add({ route: WRITE, status: 409, errorType: 'memory_precondition_failed_error', times: 1 });
      const refused = await remote.create('/c.md', 'c', undefined);
      expect(refused.ok ? undefined : refused.failure).toBe('precondition');
      expect(h.emu.memories(store.id)).toEqual({ '/a.md': 'a', '/b.md': 'b' });
    } finally {
      await copy.remove();
    }
  }, 60_000);
});
