/**
 * Pins that every request of a full memory session goes through the transport the app set up,
 * over real connections on 127.0.0.1:
 * - behind a TLS front whose certificate is trusted only through the app's global undici `Agent`
 *   (`setGlobalDispatcher(new Agent({ connect: { ca } }))`, as an app behind a TLS-inspecting
 *   proxy does): the session is served and every request the emulator answered passed the front;
 * - through an HTTP proxy set with the app's global `ProxyAgent`: the API's address answers nothing
 *   directly, so a request that went around the proxy would fail; every request passed the proxy;
 * - with a `MockAgent` as the global dispatcher and net connect disabled, a store's listing pages
 *   and writes reach the mock;
 * - importing the library, and reading a page with no global dispatcher set, installs none.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import { Agent, getGlobalDispatcher, MockAgent, ProxyAgent, setGlobalDispatcher, type Dispatcher } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runInFreshProcess } from './fresh-process.js';
import { RemoteStore } from '../../src/memory/remote/remote-store.js';
import { harness, type Harness } from '../worker/helpers.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.join(HERE, '../..');
const CERT = fs.readFileSync(path.join(HERE, 'fixtures/test-only-localhost.crt'));
const KEY = fs.readFileSync(path.join(HERE, 'fixtures/test-only-localhost.key'));
const GLOBAL_DISPATCHER = Symbol.for('undici.globalDispatcher.1');

let h: Harness;
let saved: unknown;
const closers: Array<() => Promise<void>> = [];
beforeEach(async () => {
  saved = (globalThis as Record<symbol, unknown>)[GLOBAL_DISPATCHER];
  h = await harness();
});
afterEach(async () => {
  (globalThis as Record<symbol, unknown>)[GLOBAL_DISPATCHER] = saved;
  for (const close of closers.splice(0)) await close();
  await h.cleanup();
});

/** Forward one request to the emulator, streaming both ways (event streams included). */
function forward(req: http.IncomingMessage, res: http.ServerResponse): void {
  const target = new URL(h.emu.baseURL);
  const out = http.request(
    { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host } },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  out.on('error', () => res.destroy());
  res.on('close', () => out.destroy());
  req.pipe(out);
}

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        (server as http.Server).closeAllConnections?.();
        server.close(() => resolve());
      }),
  );
  return (server.address() as AddressInfo).port;
}

/** A session with one store whose agent reads a memory and writes another; returns the store's contents after. */
async function memorySession(client: Anthropic): Promise<Record<string, string>> {
  const store = await h.emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'a' } });
  const mount = `${h.mountRoot}/notes`;
  const { sessionId, workId } = await h.emu.createSession({
    resources: [{ memoryStoreId: store.id }],
    script: [{ tool: 'bash', input: { command: `cat ${mount}/a.md; echo edited > ${mount}/b.md` } }],
  });
  const worker = h.worker({ client, sandbox: 'none' });
  const running = worker.run();
  try {
    const done = await h.emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    expect(done.toolResults.map((r) => r.text)).toEqual(['a']);
  } finally {
    await worker.close();
    await running;
  }
  expect(h.emu.workItem(workId).state).toBe('stopped');
  return h.emu.memories(store.id);
}

/** The memory routes the emulator answered must include a listing and a write: the test covers them. */
function expectMemoryTraffic(): void {
  const routes = h.emu.requests.map((r) => r.route);
  expect(routes).toContain('GET /v1/memory_stores/:id/memories');
  expect(routes).toContain('POST /v1/memory_stores/:id/memories');
}

describe("the app's transport carries every request", () => {
  it('behind a TLS front trusted only through the global Agent: served, and every request passed the front', async () => {
    let fronted = 0;
    const front = https.createServer({ cert: CERT, key: KEY }, (req, res) => {
      fronted++;
      forward(req, res);
    });
    const port = await listen(front);
    const client = new Anthropic({
      apiKey: 'sk-ant-api-operator-key',
      baseURL: `https://localhost:${port}`,
      logLevel: 'off',
      maxRetries: 0,
    });
    // Without the app's Agent the certificate is refused: the test can fail.
    await expect(client.beta.environments.retrieve(h.emu.environmentId)).rejects.toMatchObject({ name: 'APIConnectionError' });
    expect(fronted).toBe(0);

    const agent = new Agent({ connect: { ca: CERT } });
    closers.push(() => agent.close());
    setGlobalDispatcher(agent);
    const before = h.emu.requests.length;
    expect(await memorySession(client)).toEqual({ '/a.md': 'a', '/b.md': 'edited\n' });
    expectMemoryTraffic();
    // The front may also have seen a long poll the worker dropped at close, which the emulator did not log.
    expect(fronted).toBeGreaterThanOrEqual(h.emu.requests.length - before);
  }, 60_000);

  it('through an HTTP proxy set with the global ProxyAgent: every request passed the proxy', async () => {
    // The proxy's only upstream: a plain front that counts what it forwards to the emulator.
    let forwarded = 0;
    const upstream = http.createServer((req, res) => {
      forwarded++;
      forward(req, res);
    });
    const upstreamPort = await listen(upstream);
    let tunnels = 0;
    const proxy = http.createServer((req, res) => {
      // An absolute-URI request: forwarded to the upstream whatever host it names.
      const out = http.request(
        {
          host: '127.0.0.1',
          port: upstreamPort,
          method: req.method,
          path: new URL(req.url ?? '/').pathname + (new URL(req.url ?? '/').search ?? ''),
          headers: req.headers,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      out.on('error', () => res.destroy());
      req.pipe(out);
    });
    proxy.on('connect', (_req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
      tunnels++;
      const out = net.connect(upstreamPort, '127.0.0.1', () => {
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length > 0) out.write(head);
        out.pipe(socket);
        socket.pipe(out);
      });
      out.on('error', () => socket.destroy());
      socket.on('error', () => out.destroy());
    });
    const proxyPort = await listen(proxy);
    // The API's address answers nothing: a request that went around the proxy is refused.
    const closed = net.createServer();
    const deadPort = await listen(closed);
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const client = new Anthropic({ apiKey: 'sk-ant-api-operator-key', baseURL: `http://127.0.0.1:${deadPort}`, logLevel: 'off' });
    const agent = new ProxyAgent(`http://127.0.0.1:${proxyPort}`);
    closers.push(() => agent.close());
    setGlobalDispatcher(agent);
    const before = h.emu.requests.length;
    expect(await memorySession(client)).toEqual({ '/a.md': 'a', '/b.md': 'edited\n' });
    expectMemoryTraffic();
    expect(tunnels).toBeGreaterThan(0);
    expect(forwarded).toBeGreaterThanOrEqual(h.emu.requests.length - before);
  }, 60_000);

  it('with a MockAgent as the global dispatcher, listing pages and writes reach the mock', async () => {
    const mock = new MockAgent();
    mock.disableNetConnect();
    closers.push(() => mock.close());
    setGlobalDispatcher(mock);
    const origin = 'http://api.mock.test';
    const pool = mock.get(origin);
    const memory = (id: string, p: string, content: string | null) => ({
      type: 'memory',
      id,
      memory_store_id: 'memstore_mock',
      path: p,
      content,
      content_sha256: 'a'.repeat(64),
      content_size_bytes: 1,
      memory_version_id: `memver_${id}`,
      created_at: '2026-12-01T00:00:00Z',
      updated_at: '2026-12-01T00:00:00Z',
    });
    pool
      .intercept({ path: (p) => p.startsWith('/v1/memory_stores/memstore_mock/memories?'), method: 'GET' })
      .reply(200, { data: [memory('mem_1', '/a.md', null)], next_page: null }, { headers: { 'content-type': 'application/json' } });
    pool
      .intercept({ path: (p) => p.startsWith('/v1/memory_stores/memstore_mock/memories'), method: 'POST' })
      .reply(200, memory('mem_2', '/b.md', 'b'), { headers: { 'content-type': 'application/json' } });
    const client = new Anthropic({ apiKey: null, authToken: 'tok', baseURL: origin, logLevel: 'off', maxRetries: 0 });
    const remote = new RemoteStore(client, 'memstore_mock', { readRetries: 0 });
    expect((await remote.listBasic()).map((m) => m.path)).toEqual(['/a.md']);
    const created = await remote.create('/b.md', 'b', undefined);
    expect(created).toMatchObject({ ok: true, id: 'mem_2' });
    mock.assertNoPendingInterceptors();
  });

  it("importing the library and reading pages leaves the process's global dispatcher as it was", () => {
    // Node installs its own default dispatcher the first time its web globals are touched (as any
    // app's first fetch does); the library must neither replace it nor add one of its own. That
    // option-less default carries nothing an app chose, so the library's own agent stands in for it.
    const script = `
      const key = Symbol.for('undici.globalDispatcher.1');
      void globalThis.Response;
      const nodeDefault = globalThis[key];
      const lib = await import(${JSON.stringify(path.join(ROOT, 'src/index.ts'))});
      const pages = await import(${JSON.stringify(path.join(ROOT, 'src/api/dispatcher-choice.ts'))});
      const afterImport = globalThis[key] === nodeDefault;
      const chosen = pages.dispatcherFor(undefined) === nodeDefault;
      const ownForDefault = pages.dispatcherFor(undefined) === (await import(${JSON.stringify(path.join(ROOT, 'src/api/own-agent.ts'))})).ownAgent();
      Object.defineProperty(globalThis, key, { value: undefined, writable: true });
      const own = pages.dispatcherFor(undefined);
      process.stdout.write(JSON.stringify({
        lib: typeof lib.EnvironmentWorker,
        nodeDefault: nodeDefault !== undefined,
        afterImport,
        chosen,
        ownForDefault,
        own: typeof own.dispatch,
        ownInstalled: globalThis[key] !== undefined,
      }));
    `;
    expect(runInFreshProcess(script)).toEqual({
      lib: 'function',
      nodeDefault: true,
      afterImport: true,
      chosen: false,
      ownForDefault: true,
      own: 'function',
      ownInstalled: false,
    });
  }, 70_000);

  it("a polling worker has the transport ready before any work item, built on the runtime's own undici", () => {
    // A fresh process: importing the library builds nothing; run() builds the library's own agent
    // before its first claim, not inside the first mount, from the class of the runtime's default
    // agent, so the undici package's copy is never loaded.
    const script = `
      const fs = await import('node:fs');
      const os = await import('node:os');
      const path = await import('node:path');
      const { createRequire } = await import('node:module');
      const cache = createRequire(${JSON.stringify(path.join(ROOT, 'package.json'))}).cache;
      const packageCopy = () => Object.keys(cache).some((k) => k.endsWith(path.join('undici', 'lib', 'dispatcher', 'agent.js')));
      const ownAgentModule = await import(${JSON.stringify(path.join(ROOT, 'src/api/own-agent.ts'))});
      const loaded = () => ownAgentModule.ownAgentBuilt();
      const { startEmulator } = await import(${JSON.stringify(path.join(ROOT, 'src/testing/index.ts'))});
      const { EnvironmentWorker } = await import(${JSON.stringify(path.join(ROOT, 'src/index.ts'))});
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'maw-preload-'));
      const emu = await startEmulator({ mountRoot: path.join(dir, 'mnt') });
      const afterImport = loaded();
      const worker = new EnvironmentWorker({
        client: emu.client(),
        environmentId: emu.environmentId,
        environmentKey: emu.environmentKey,
        workdir: path.join(dir, 'work'),
        stateDir: path.join(dir, 'state'),
        sandbox: 'none',
        logger: (await import('pino')).default({ level: 'silent' }),
      });
      const ctrl = new AbortController();
      const running = worker.run(ctrl.signal);
      await new Promise((resolve) => worker.once('polled', resolve));
      const afterPoll = loaded();
      const runtimeClass = ownAgentModule.ownAgent().constructor === globalThis[Symbol.for('undici.globalDispatcher.1')].constructor;
      const claims = emu.requests.filter((r) => r.path.includes('/work/') && r.method === 'POST').length;
      ctrl.abort();
      await running;
      await emu.close();
      fs.rmSync(dir, { recursive: true, force: true });
      process.stdout.write(JSON.stringify({ afterImport, afterPoll, claims, runtimeClass, packageCopy: packageCopy() }));
    `;
    expect(runInFreshProcess(script)).toEqual({ afterImport: false, afterPoll: true, claims: 0, runtimeClass: true, packageCopy: false });
  }, 70_000);

  it('a client whose fetchOptions carry a dispatcher keeps it over the global one', async () => {
    const seen: string[] = [];
    const global = getGlobalDispatcher();
    const mine: Dispatcher = new (class extends Agent {
      override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandlers): boolean {
        seen.push(String(opts.path));
        return super.dispatch(opts, handler);
      }
    })();
    closers.push(() => mine.close());
    expect(global).toBeDefined();
    const store = await h.emu.createMemoryStore({ name: 'Own', memories: { '/a.md': 'a' } });
    const { sessionId } = await h.emu.createSession({ resources: [{ memoryStoreId: store.id }] });
    const client = h.emu.sessionClient(sessionId, { fetchOptions: { dispatcher: mine } as never });
    const remote = new RemoteStore(client, store.id);
    await remote.listFull(undefined, () => undefined);
    expect(seen.some((p) => p.startsWith(`/v1/memory_stores/${store.id}/memories?`))).toBe(true);
  });
});
