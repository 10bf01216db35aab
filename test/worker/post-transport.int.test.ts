/**
 * Pins the transport of the worker's posts, over real HTTP against the emulator: when the client
 * uses the runtime's default `fetch`, the tool results, the ack, the heartbeats and the stop go
 * through the buffered transport, while the poll, the session, the history and the event stream
 * stay on the runtime's `fetch`. Under a faulty server the posts behave as before: a 5xx or a
 * dropped answer on a tool result is retried and the session ends answered, a hung one is retried
 * once the client's timeout passes, and a 5xx on the stop is retried until the item is stopped.
 * A client with a fetch of its own keeps it for every request.
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
  it('posts go through the buffered transport; the poll, session, history and event stream through the runtime fetch', async () => {
    const runtimeFetch = vi.spyOn(globalThis, 'fetch');
    const { sessionId, workId, done } = await runSession();

    expect(done.toolResults.map((r) => r.text)).toEqual(['one', 'two']);
    const viaRuntime = runtimeFetch.mock.calls.map(
      ([input, init]) => `${init?.method ?? 'GET'} ${new URL(String(input instanceof Request ? input.url : input)).pathname}`,
    );
    expect(viaRuntime.filter((c) => !c.startsWith('GET '))).toEqual([]);
    expect(viaRuntime).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^GET \/v1\/environments\/[^/]+\/work\/poll$/),
        `GET /v1/sessions/${sessionId}`,
        `GET /v1/sessions/${sessionId}/events`,
        `GET /v1/sessions/${sessionId}/events/stream`,
      ]),
    );
    // The posts reached the server all the same.
    const posts = h.emu.requests.filter((r) => r.method === 'POST' && r.status === 200).map((r) => r.route.split('/').at(-1));
    expect(posts).toEqual(expect.arrayContaining(['ack', 'heartbeat', 'events', 'stop']));
    expect(h.emu.workItem(workId).state).toBe('stopped');
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
