/**
 * Pins the library's own undici agent, the one requests take when the app chose no transport:
 * - it stands in only for an option-less `Agent` (what the runtime's `fetch` installs), never for
 *   an agent or dispatcher an app configured; the recognition reads undici's own fields, and the
 *   first test fails if they move; it is built from the runtime's own undici when that agent is
 *   there, else from the undici package;
 * - its connections read into one buffer each, reused: many concurrent bodies of distinct bytes
 *   arrive whole and unmixed, over HTTP and over TLS (whose sessions are resumed);
 * - a large body arrives in one buffer per connection, where an agent on Node's sockets hands
 *   over a new buffer per read.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, MockAgent, Pool, ProxyAgent, interceptors, type Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runInFreshProcess } from './fresh-process.js';
import { isDefaultAgent, ownAgent } from '../../src/api/own-agent.js';
import { dispatcherFor } from '../../src/api/dispatcher-choice.js';
import { pageFetch } from '../../src/api/page-fetch.js';
import { takeLentBody, type LentBody } from '../../src/api/page-response.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const CERT_FILE = path.join(HERE, 'fixtures/test-only-localhost.crt');
const KEY_FILE = path.join(HERE, 'fixtures/test-only-localhost.key');

const bodies = new Map<string, Buffer>();

/**
 * The bytes of body `id`: a pattern no other body shares, so a mixed or overwritten chunk shows.
 * Made once (the server shares this process, and what it allocates would blur the trail measured).
 */
function bodyOf(id: number, bytes: number): Buffer {
  const key = `${id}/${bytes}`;
  const made = bodies.get(key);
  if (made !== undefined) return made;
  const out = Buffer.allocUnsafe(bytes);
  const seed = crypto.createHash('sha256').update(String(id)).digest();
  for (let i = 0; i < bytes; i += seed.length) seed.copy(out, i, 0, Math.min(seed.length, bytes - i));
  for (let i = 0; i + 4 <= bytes; i += 4096) out.writeUInt32BE((i ^ id) >>> 0, i);
  bodies.set(key, out);
  return out;
}

const sha = (b: Uint8Array): string => crypto.createHash('sha256').update(b).digest('hex');

/** A body server: `/body/<id>/<bytes>[?chunked]`, sent in uneven writes. */
function bodyServer(): http.RequestListener {
  return (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const [, , id, bytes] = url.pathname.split('/');
    const body = bodyOf(Number(id), Number(bytes));
    if (!url.searchParams.has('chunked')) res.setHeader('content-length', body.length);
    let at = 0;
    const step = (): void => {
      while (at < body.length) {
        const n = Math.min(body.length - at, 1000 + ((at * 7) % 90_000));
        const more = res.write(body.subarray(at, at + n));
        at += n;
        if (!more) return void res.once('drain', step);
      }
      res.end();
    };
    step();
  };
}

function lender(): { lend: (n: number) => LentBody; out: number; back: number } {
  const l = {
    out: 0,
    back: 0,
    lend: (n: number): LentBody => {
      l.out++;
      return { bytes: Buffer.alloc(n), done: () => void l.back++ };
    },
  };
  return l;
}

describe("the library's own agent", () => {
  it("stands in for the runtime's option-less default agent, and for nothing an app configured", () => {
    // A fresh process: the runtime installs its default agent when its web globals are first touched.
    const script = `
      void globalThis.Response;
      const d = globalThis[Symbol.for('undici.globalDispatcher.1')];
      const { isDefaultAgent } = await import(${JSON.stringify(path.join(ROOT, 'src/api/own-agent.ts'))});
      process.stdout.write(JSON.stringify({ name: d?.constructor?.name, isDefault: isDefaultAgent(d) }));
    `;
    expect(runInFreshProcess(script)).toEqual({ name: 'Agent', isDefault: true });

    const ca = fs.readFileSync(CERT_FILE);
    expect(isDefaultAgent(new Agent())).toBe(true);
    const configured = {
      ca: new Agent({ connect: { ca } }),
      connector: new Agent({ connect: () => {} }),
      pool: new Agent({ connections: 4 }),
      redirects: new Agent({ maxRedirections: 2 }),
      factory: new Agent({ factory: (origin) => new Pool(origin) }),
      interceptors: new Agent({ interceptors: { Agent: [], Client: [] } } as never),
      composed: new Agent().compose(interceptors.retry()),
      proxy: new ProxyAgent('http://127.0.0.1:9'),
      mock: new MockAgent(),
      bare: new Pool('http://127.0.0.1:9'),
    };
    const taken = Object.entries(configured).filter(([, d]) => isDefaultAgent(d as never));
    expect(taken).toEqual([]);
  }, 70_000);

  describe('over HTTP', () => {
    let server: http.Server;
    let base = '';
    beforeAll(async () => {
      server = http.createServer(bodyServer());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });

    it('reads many concurrent bodies whole and unmixed, each in its lent buffer', async () => {
      const l = lender();
      const get = pageFetch(8 << 20, { lend: l.lend, stallTimeoutMs: 10_000 });
      const ask = Array.from({ length: 24 }, (_, i) => ({ id: i + 1, bytes: 1 + ((i * 389_111) % (3 << 20)), chunked: i % 3 === 0 }));
      const got = await Promise.all(
        ask.map(async ({ id, bytes, chunked }) => {
          const res = await get(`${base}/body/${id}/${bytes}${chunked ? '?chunked' : ''}`);
          const lent = takeLentBody(res);
          if (lent?.kind !== 'body') throw new Error(`body ${id}: ${JSON.stringify(lent)}`);
          const digest = sha(lent.body.bytes);
          lent.body.done();
          return digest;
        }),
      );
      expect(got).toEqual(ask.map(({ id, bytes }) => sha(bodyOf(id, bytes))));
      expect(dispatcherFor(undefined)).toBe(ownAgent());
      // Every buffer lent came back: the bodies' own (given back above) and those a chunked body grew through.
      expect(l.out).toBeGreaterThanOrEqual(ask.length);
      expect(l.back).toBe(l.out);
    }, 60_000);

    it('hands a large body over in one reused buffer per connection, where an agent on Node sockets allocates one per read', async () => {
      // What is measured is the mechanism: the buffers the chunks live in. (The effect on the
      // process's peak, tens of MiB on a 250 MiB mount, is `npm run bench -- --caps`.)
      const buffersSeen = (dispatcher: Dispatcher): Promise<{ reads: number; buffers: number; digest: string }> =>
        new Promise((resolve, reject) => {
          const buffers = new Set<ArrayBufferLike>();
          const body = Buffer.alloc(32 << 20);
          let at = 0;
          let reads = 0;
          dispatcher.dispatch(
            { origin: base, path: `/body/9/${32 << 20}`, method: 'GET' },
            {
              onConnect: () => {},
              onHeaders: () => true,
              onData: (chunk: Buffer) => {
                reads++;
                buffers.add(chunk.buffer);
                at += chunk.copy(body, at);
                return true;
              },
              onComplete: () => resolve({ reads, buffers: buffers.size, digest: sha(body.subarray(0, at)) }),
              onError: reject,
            },
          );
        });
      const plain = new Agent();
      const [own, nodeSockets] = [await buffersSeen(ownAgent()), await buffersSeen(plain)];
      await plain.close();
      const digest = sha(bodyOf(9, 32 << 20));
      expect(own.digest).toBe(digest);
      expect(nodeSockets.digest).toBe(digest);
      expect(own.reads).toBeGreaterThan(100);
      expect(own.buffers).toBe(1);
      expect(nodeSockets.buffers).toBeGreaterThan(100);
    }, 60_000);
  });

  it("is built from the undici package when the runtime's default agent is not there, and reads as well", () => {
    // A fresh process whose global dispatcher was removed after the runtime's fetch loaded.
    const script = `
      const http = await import('node:http');
      const { createRequire } = await import('node:module');
      void globalThis.Response;
      Object.defineProperty(globalThis, Symbol.for('undici.globalDispatcher.1'), { value: undefined, writable: true });
      const { pageFetch } = await import(${JSON.stringify(path.join(ROOT, 'src/api/page-fetch.ts'))});
      const { takeLentBody } = await import(${JSON.stringify(path.join(ROOT, 'src/api/page-response.ts'))});
      const { dispatcherFor } = await import(${JSON.stringify(path.join(ROOT, 'src/api/dispatcher-choice.ts'))});
      const { ownAgent } = await import(${JSON.stringify(path.join(ROOT, 'src/api/own-agent.ts'))});
      const server = http.createServer((req, res) => res.end(Buffer.alloc(3_000_000, 7)));
      await new Promise((r) => server.listen(0, '127.0.0.1', r));
      const get = pageFetch(8 << 20, { lend: (n) => ({ bytes: Buffer.alloc(n), done() {} }), stallTimeoutMs: 10000 });
      const lent = takeLentBody(await get('http://127.0.0.1:' + server.address().port + '/'));
      const PackageAgent = createRequire(${JSON.stringify(path.join(ROOT, 'package.json'))})('undici/lib/dispatcher/agent.js');
      server.close();
      process.stdout.write(JSON.stringify({
        whole: lent.kind === 'body' && lent.body.bytes.length === 3_000_000 && lent.body.bytes.every((x) => x === 7),
        own: dispatcherFor(undefined) === ownAgent(),
        packageClass: ownAgent() instanceof PackageAgent,
        installed: globalThis[Symbol.for('undici.globalDispatcher.1')] !== undefined,
      }));
      process.exit(0);
    `;
    expect(runInFreshProcess(script)).toEqual({ whole: true, own: true, packageClass: true, installed: false });
  }, 70_000);

  it('over TLS: bodies whole and unmixed, and a new connection resumes the TLS session', () => {
    // A fresh process that trusts the test CA the way an operator would (NODE_EXTRA_CA_CERTS), so
    // the library's own agent, not one configured with a CA, makes the connections.
    const script = `
      const https = await import('node:https');
      const fs = await import('node:fs');
      const crypto = await import('node:crypto');
      const { pageFetch } = await import(${JSON.stringify(path.join(ROOT, 'src/api/page-fetch.ts'))});
      const { takeLentBody } = await import(${JSON.stringify(path.join(ROOT, 'src/api/page-response.ts'))});
      const { dispatcherFor } = await import(${JSON.stringify(path.join(ROOT, 'src/api/dispatcher-choice.ts'))});
      const { ownAgent } = await import(${JSON.stringify(path.join(ROOT, 'src/api/own-agent.ts'))});
      let resumed = 0, fresh = 0;
      const server = https.createServer({ cert: fs.readFileSync(${JSON.stringify(CERT_FILE)}), key: fs.readFileSync(${JSON.stringify(KEY_FILE)}) }, (req, res) => {
        const n = Number(req.url.split('/')[2]);
        const body = Buffer.alloc(n, n % 251);
        res.setHeader('connection', 'close');
        res.end(body);
      });
      server.on('secureConnection', (s) => (s.isSessionReused() ? resumed++ : fresh++));
      await new Promise((r) => server.listen(0, '127.0.0.1', r));
      const base = 'https://localhost:' + server.address().port;
      const get = pageFetch(8 << 20, { lend: (n) => ({ bytes: Buffer.alloc(n), done() {} }), stallTimeoutMs: 10000 });
      const ok = [];
      for (const n of [300000, 1000, 2000000]) {
        const lent = takeLentBody(await get(base + '/b/' + n));
        ok.push(lent.kind === 'body' && lent.body.bytes.length === n && lent.body.bytes.every((x) => x === n % 251));
      }
      const many = await Promise.all([5, 6, 7, 8].map(async (k) => {
        const n = 100000 * k + k;
        const lent = takeLentBody(await get(base + '/b/' + n));
        return lent.body.bytes.length === n && lent.body.bytes.every((x) => x === n % 251);
      }));
      server.close();
      process.stdout.write(JSON.stringify({ ok, many, own: dispatcherFor(undefined) === ownAgent(), runtimeClass: ownAgent().constructor === globalThis[Symbol.for('undici.globalDispatcher.1')].constructor, resumedAny: resumed > 0, fresh: fresh >= 1 }));
      process.exit(0);
    `;
    expect(runInFreshProcess(script, { ...process.env, NODE_EXTRA_CA_CERTS: CERT_FILE })).toEqual({
      ok: [true, true, true],
      many: [true, true, true, true],
      own: true,
      runtimeClass: true,
      resumedAny: true,
      fresh: true,
    });
  }, 70_000);
});
