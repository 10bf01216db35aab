/**
 * Pins the transport of the worker's requests, over real HTTP against the emulator: every request
 * (the poll, the ack, the heartbeats, the session, the history, the event stream, the listings, the
 * memory writes, the tool results and the stop) goes through the app's transport; here a
 * `globalThis.fetch` replaced before the client was built (as msw, nock or `vi.stubGlobal` do),
 * which must see every request the emulator answered. Under a faulty server the posts behave as
 * before: a 5xx or a dropped answer on a tool result is retried and the session ends answered, a
 * hung one is retried once the client's timeout passes, and a 5xx on the stop is retried until the
 * item is stopped. A client with a fetch of its own keeps it for every request.
 */
import Anthropic from '@anthropic-ai/sdk';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { FaultRule } from '../../src/testing/index.js';
import { harness, type Harness } from './helpers.js';

const RESULT_POST = /^POST \/v1\/sessions\/[^/]+\/events$/;
const STOP = /^POST \/v1\/environments\/[^/]+\/work\/[^/]+\/stop$/;

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  vi.restoreAllMocks();
  await h.cleanup();
});

/** Run the worker until a two-call session ends; the client is built after any spy on the runtime fetch. */
async function runSession(clientOptions: ConstructorParameters<typeof Anthropic>[0] = {}) {
  const { sessionId, workId } = await h.emu.createSession({
    script: [
      { tool: 'bash', input: { command: 'echo one' } },
      { tool: 'bash', input: { command: 'echo two' } },
    ],
  });
  const client = new Anthropic({ apiKey: 'sk-ant-api-operator-key', baseURL: h.emu.baseURL, logLevel: 'off', ...clientOptions });
  const worker = h.worker({ client });
  const running = worker.run();
  try {
    const done = await h.emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    return { sessionId, workId, done };
  } finally {
    await worker.close();
    await running;
  }
}

const requestsMatching = (re: RegExp) => h.emu.requests.filter((r) => re.test(`${r.method} ${r.path}`));

describe('with the runtime default fetch', () => {
  it('a global fetch replaced before the client was built sees every request, memory included', async () => {
    const seen: string[] = [];
    const realFetch = globalThis.fetch;
    vi.stubGlobal('fetch', (input: string | URL | Request, init?: RequestInit) => {
      seen.push(`${init?.method ?? 'GET'} ${new URL(String(input instanceof Request ? input.url : input)).pathname}`);
      return realFetch(input, init);
    });
    try {
      const store = await h.emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'a' } });
      const mount = `${h.mountRoot}/notes`;
      const { sessionId, workId } = await h.emu.createSession({
        resources: [{ memoryStoreId: store.id }],
        script: [{ tool: 'bash', input: { command: `cat ${mount}/a.md; echo edited > ${mount}/b.md` } }],
      });
      const client = new Anthropic({ apiKey: 'sk-ant-api-operator-key', baseURL: h.emu.baseURL, logLevel: 'off' });
      const worker = h.worker({ client, sandbox: 'none' });
      const running = worker.run();
      try {
        await h.emu.waitForSession(sessionId, { timeoutMs: 30_000 });
      } finally {
        await worker.close();
        await running;
      }
      expect(h.emu.memories(store.id)).toEqual({ '/a.md': 'a', '/b.md': 'edited\n' });
      expect(h.emu.workItem(workId).state).toBe('stopped');
      const answered = h.emu.requests.map((r) => `${r.method} ${r.path}`);
      expect(answered).toEqual(expect.arrayContaining([expect.stringMatching(/^GET \/v1\/memory_stores\/[^/]+\/memories$/)]));
      expect(answered).toEqual(expect.arrayContaining([expect.stringMatching(/^POST \/v1\/memory_stores\/[^/]+\/memories$/)]));
      // Every request the emulator saw went through the replaced fetch (it may have seen more: aborted long polls).
      for (const r of answered) expect(seen).toContain(r);
      expect(seen.length).toBeGreaterThanOrEqual(answered.length);
    } finally {
      vi.unstubAllGlobals();
    }
  });

  const rows: Array<{ description: string; fault: FaultRule; clientOptions?: ConstructorParameters<typeof Anthropic>[0] }> = [
    { description: 'a 503 on a tool result is retried', fault: { route: RESULT_POST, status: 503, times: 1 } },
    { description: 'a tool result whose answer is dropped is retried', fault: { route: RESULT_POST, dropResponse: true, times: 1 } },
    {
      description: 'a tool result whose answer never comes is retried after the client timeout',
      fault: { route: RESULT_POST, hang: true, times: 1 },
      clientOptions: { timeout: 3_000 },
    },
    {
      description: 'an answer that is not JSON is retried as a lost answer',
      fault: { route: RESULT_POST, rewrite: () => '{"data": [', times: 1 },
    },
  ];
  it.each(rows)(
    '$description, and the session ends with every call answered',
    async ({ fault, clientOptions }) => {
      const added = h.emu.faults.add(fault);
      const { workId, done } = await runSession(clientOptions);

      expect(added.hits).toBe(1);
      expect(new Set(done.toolResults.map((r) => r.toolUseId)).size).toBe(2);
      expect([...new Set(done.toolResults.map((r) => r.text))]).toEqual(['one', 'two']);
      expect(requestsMatching(RESULT_POST).length).toBeGreaterThanOrEqual(3);
      expect(h.emu.workItem(workId).state).toBe('stopped');
    },
    40_000,
  );

  it('a 503 on the stop is retried until the item is stopped', async () => {
    const added = h.emu.faults.add({ route: STOP, status: 503, times: 1 });
    const { workId } = await runSession();

    expect(added.hits).toBe(1);
    expect(requestsMatching(STOP).map((r) => r.status)).toEqual([503, 200]);
    expect(h.emu.workItem(workId).state).toBe('stopped');
  });
});

describe('a client with a fetch of its own', () => {
  it('keeps it for the posts too', async () => {
    const methods: string[] = [];
    const own: typeof fetch = (input, init) => {
      methods.push(init?.method ?? 'GET');
      return fetch(input, init);
    };
    const { done } = await runSession({ fetch: own });

    expect(done.toolResults.map((r) => r.text)).toEqual(['one', 'two']);
    expect(methods.filter((m) => m === 'POST').length).toBeGreaterThanOrEqual(5);
  });
});
