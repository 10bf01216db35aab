/**
 * Pins the lean HTTP client (src/api/lean-http.ts) against raw TCP servers on 127.0.0.1
 * that answer byte by byte as a wrong or hostile server would:
 * - answers are framed by length, by chunks (cut anywhere, across reads), or by the connection's
 *   close, after interim answers; the body lands in the buffer the caller lends;
 * - a connection is kept and reused only after an answer read to its exact end; a kept connection
 *   the server closed meanwhile costs one more connection, never a failed request;
 * - an oversized, malformed or smuggling head, a bad chunk, bytes after the end, or a head that
 *   never ends fail the request (as a connection error, through the SDK's fetch contract) and
 *   drop the connection;
 * - reading a large body allocates nothing per read: the bytes go from the connection's one read
 *   buffer into the lent one.
 */
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { bufferedFetch } from '../../src/api/buffered-fetch.js';
import { IDLE_MS, MAX_HEAD_BYTES, leanHttpStats, leanRequest, type LentBody, type LeanAnswer } from '../../src/api/lean-http.js';

type OnRequest = (socket: net.Socket, request: string, index: number) => void;

interface RawServer {
  url: string;
  connections: () => number;
  requests: string[];
  /** The body of each request, in order. */
  bodies: string[];
  close(): Promise<void>;
}

let server: RawServer | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await server?.close();
  server = undefined;
});

/** A TCP server that calls `onRequest` for each whole request (head and body) it reads, on any connection. */
async function rawServer(onRequest: OnRequest): Promise<RawServer> {
  let connections = 0;
  const requests: string[] = [];
  const bodies: string[] = [];
  const sockets = new Set<net.Socket>();
  const srv = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let pending = '';
    socket.on('data', (d: Buffer) => {
      pending += d.toString('latin1');
      for (let end = pending.indexOf('\r\n\r\n'); end >= 0; end = pending.indexOf('\r\n\r\n')) {
        const head = pending.slice(0, end);
        const length = Number(/\r\ncontent-length: (\d+)/iu.exec(head)?.[1] ?? 0);
        if (pending.length < end + 4 + length) break;
        bodies.push(Buffer.from(pending.slice(end + 4, end + 4 + length), 'latin1').toString('utf8'));
        pending = pending.slice(end + 4 + length);
        requests.push(head);
        onRequest(socket, head, requests.length - 1);
      }
    });
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/v1/memory_stores/memstore_x/memories?view=full`,
    connections: () => connections,
    requests,
    bodies,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        srv.close(() => resolve());
      }),
  };
}

interface Lender {
  lend: (n: number) => LentBody;
  out: number;
}

function lender(): Lender {
  const l: Lender = {
    out: 0,
    lend: (n) => {
      l.out++;
      let back = false;
      return {
        bytes: Buffer.alloc(n),
        done: () => {
          if (!back) l.out--;
          back = true;
        },
      };
    },
  };
  return l;
}

function get(url: string, l: Lender, opts: { cap?: number; stallMs?: number; signal?: AbortSignal } = {}): Promise<LeanAnswer> {
  return leanRequest({
    method: 'GET',
    url: new URL(url),
    headers: { accept: 'application/json', 'x-api-key': 'sk-test' },
    signal: opts.signal,
    capBytes: opts.cap ?? 1 << 20,
    pages: { lend: l.lend, stallTimeoutMs: opts.stallMs ?? 5_000 },
  });
}

function bodyOf(a: LeanAnswer): string {
  if (a.body.kind === 'bytes') return a.body.bytes.toString('utf8');
  if (a.body.answer.kind !== 'body') throw new Error(`no body: ${JSON.stringify(a.body.answer)}`);
  const text = a.body.answer.body.bytes.toString('utf8');
  a.body.answer.body.done();
  return text;
}

const ok = (body: string, extra = ''): string => `HTTP/1.1 200 OK\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

/** Write `text` a few bytes at a time, so every boundary falls inside some read. */
async function trickle(socket: net.Socket, text: string, step = 3): Promise<void> {
  for (let at = 0; at < text.length && !socket.destroyed; at += step) {
    socket.write(text.slice(at, at + step), 'latin1');
    await new Promise((r) => setTimeout(r, 1));
  }
}

async function failure(p: Promise<unknown>): Promise<Error> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(Error);
  return e as Error;
}

describe('the lean HTTP client', () => {
  it('sends a plain GET with the given headers, and reuses the connection for the next request', async () => {
    server = await rawServer((s, _h, i) => s.write(ok(`{"n":${i}}`)));
    const l = lender();
    const before = leanHttpStats();
    const first = await get(server.url, l);
    const second = await get(server.url, l);
    expect([first.status, bodyOf(first), bodyOf(second)]).toEqual([200, '{"n":0}', '{"n":1}']);
    expect(server.connections()).toBe(1);
    expect(leanHttpStats().connections - before.connections).toBe(1);
    expect(server.requests[0]).toMatch(/^GET \/v1\/memory_stores\/memstore_x\/memories\?view=full HTTP\/1\.1\r\n/u);
    expect(server.requests[0]).toContain('\r\nx-api-key: sk-test');
    expect(server.requests[0]).toMatch(/\r\nhost: 127\.0\.0\.1:\d+/u);
    expect(l.out).toBe(0);
  });

  it('sends a POST with its body and length, and never sends it twice when a kept connection was closed', async () => {
    server = await rawServer((s, _head, i) => {
      if (i === 1) setTimeout(() => s.destroy(), 20);
      else setTimeout(() => s.write(ok(`{"n":${i}}`)), 20);
    });
    const post = (n: number) =>
      leanRequest({
        method: 'POST',
        url: new URL(server!.url),
        headers: { 'content-type': 'application/json' },
        body: Buffer.from(JSON.stringify({ n })),
        signal: undefined,
        capBytes: 1024,
      });
    const first = await post(1);
    expect(first.body.kind === 'bytes' && first.body.bytes.toString()).toBe('{"n":0}');
    const e = await failure(post(2));
    expect(e.message).toMatch(/closed before the answer|ECONNRESET/u);
    expect(server.requests.length).toBe(2);
    expect(server.requests[0]).toMatch(/^POST .* HTTP\/1\.1\r\n/u);
    expect(server.requests[0]).toContain('\r\ncontent-length: 7');
    expect(server.bodies).toEqual(['{"n":1}', '{"n":2}']);
  });

  it('fails a body over the bound for a request that does not lend, and reads an error answer whole', async () => {
    server = await rawServer((s, _h, i) =>
      s.write(
        i === 0 ? ok('x'.repeat(5000)) : `HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{"e":\r\n2\r\n1}\r\n0\r\n\r\n`,
      ),
    );
    const req = { method: 'GET', url: new URL(server.url), headers: {}, signal: undefined, capBytes: 1024 };
    expect((await failure(leanRequest(req))).message).toMatch(/passed 1024 bytes/u);
    const notFound = await leanRequest(req);
    expect([notFound.status, notFound.statusText, bodyOf(notFound)]).toEqual([404, 'Not Found', '{"e":1}']);
  });

  it('refuses a header that would split the request, sending nothing', async () => {
    server = await rawServer((s) => s.write(ok('{}')));
    const e = await failure(
      leanRequest({
        method: 'GET',
        url: new URL(server.url),
        headers: { 'x-bad': 'a\r\nx-injected: 1' },
        signal: undefined,
        capBytes: 1024,
        pages: { lend: lender().lend, stallTimeoutMs: 1_000 },
      }),
    );
    expect(e.message).toMatch(/invalid header "x-bad"/u);
    // The error names the header, never its value (a header may carry a credential).
    expect(e.message).not.toContain('x-injected');
    expect(server.requests).toEqual([]);
  });

  it('reads heads and chunked bodies cut at every byte, after an interim answer, with trailers', async () => {
    const body = 'x'.repeat(300) + '{"é":1}';
    server = await rawServer((s) => {
      const bytes = Buffer.from(body);
      const chunked =
        `HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nrequest-id: req_1\r\n\r\n` +
        `${(100).toString(16)};ext=1\r\n${bytes.subarray(0, 100).toString('latin1')}\r\n` +
        `${(bytes.length - 100).toString(16)}\r\n${bytes.subarray(100).toString('latin1')}\r\n0\r\nx-trailer: y\r\n\r\n`;
      void trickle(s, chunked);
    });
    const l = lender();
    const a = await get(server.url, l);
    expect(a.status).toBe(200);
    expect(a.rawHeaders).toEqual(['transfer-encoding', 'chunked', 'request-id', 'req_1']);
    expect(bodyOf(a)).toBe(body);
    expect(l.out).toBe(0);
    // Read to its exact end: the connection is kept.
    await get(server.url, l).then(bodyOf);
    expect(server.connections()).toBe(1);
  });

  it('reads a body framed by the connection closing, and does not keep that connection', async () => {
    server = await rawServer((s) => {
      s.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"closed":');
      setTimeout(() => s.end('true}'), 20);
    });
    const l = lender();
    expect(bodyOf(await get(server.url, l))).toBe('{"closed":true}');
    expect(bodyOf(await get(server.url, l))).toBe('{"closed":true}');
    expect(server.connections()).toBe(2);
  });

  it('sends once more on a new connection when the kept one was closed by the server', async () => {
    // The second request's connection is dropped without a byte of answer: a kept connection the
    // server timed out just as the request went out.
    server = await rawServer((s, _h, i) => (i === 1 ? s.destroy() : s.write(ok(`{"n":${i}}`))));
    const l = lender();
    expect(bodyOf(await get(server.url, l))).toBe('{"n":0}');
    expect(bodyOf(await get(server.url, l))).toBe('{"n":2}');
    expect(server.connections()).toBe(2);
  });

  it('drops a kept connection the server closed while it was idle', async () => {
    server = await rawServer((s, _h, i) => {
      s.write(ok(`{"n":${i}}`));
      setTimeout(() => s.end(), 10);
    });
    const l = lender();
    bodyOf(await get(server.url, l));
    await new Promise((r) => setTimeout(r, 100));
    const idle = leanHttpStats().idle;
    expect(bodyOf(await get(server.url, l))).toBe('{"n":1}');
    expect(idle).toBe(0);
    expect(server.connections()).toBe(2);
  });

  it('does not use a connection kept longer than its idle bound, and closes it', async () => {
    let closed = 0;
    server = await rawServer((s, _h, i) => {
      s.on('close', () => closed++);
      s.write(ok(`{"n":${i}}`));
    });
    const l = lender();
    bodyOf(await get(server.url, l));
    const now = Date.now();
    vi.spyOn(Date, 'now').mockReturnValue(now + IDLE_MS + 1);
    expect(bodyOf(await get(server.url, l))).toBe('{"n":1}');
    expect(server.connections()).toBe(2);
    await new Promise((r) => setTimeout(r, 50));
    expect(closed).toBe(1);
  });

  it("keeps a connection a second less than the server's keep-alive timeout says, and not at all under a second", async () => {
    server = await rawServer((s, _h, i) => s.write(ok(`{"n":${i}}`, i < 2 ? 'keep-alive: timeout=2\r\n' : 'keep-alive: timeout=1\r\n')));
    const l = lender();
    const now = Date.now();
    bodyOf(await get(server.url, l));
    const at = vi.spyOn(Date, 'now').mockReturnValue(now + 900);
    bodyOf(await get(server.url, l));
    expect(server.connections()).toBe(1);
    at.mockReturnValue(now + 900 + 1_001);
    bodyOf(await get(server.url, l));
    expect(server.connections()).toBe(2);
    // `timeout=1` leaves no second in hand: that connection is not kept.
    bodyOf(await get(server.url, l));
    expect(server.connections()).toBe(3);
  });

  it('does not send again when a new connection fails before its answer', async () => {
    server = await rawServer((s) => s.destroy());
    const e = await failure(get(server.url, lender()));
    expect(e.message).toMatch(/closed before the answer|ECONNRESET/u);
    expect(server.requests.length).toBe(1);
  });

  it.each<[string, string]>([
    ['a status line that is not HTTP/1.x', 'HTTP/2 200 OK\r\ncontent-length: 2\r\n\r\n{}'],
    ['a header line without a name', 'HTTP/1.1 200 OK\r\n: x\r\ncontent-length: 2\r\n\r\n{}'],
    ['both a length and chunks', 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n'],
    ['two different lengths', 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}'],
    ['a length that is not a number', 'HTTP/1.1 200 OK\r\ncontent-length: -2\r\n\r\n{}'],
    ['a coding other than chunked', 'HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n{}'],
    ['a malformed chunk size', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n'],
    ['a chunk longer than its size', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\n{}\r\n0\r\n\r\n'],
    ['bytes after the end of the body', 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\n\r\n'],
    ['a protocol switch', 'HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\n\r\n'],
  ])('fails an answer with %s and drops the connection', async (_what, answer) => {
    server = await rawServer((s, _h, i) => s.write(i === 0 ? answer : ok('{"next":true}')));
    const l = lender();
    const e = await failure(get(server.url, l));
    expect(e.message).toMatch(/malformed answer/u);
    expect(l.out).toBe(0);
    // The next request does not read what is left of the bad one: a new connection.
    expect(bodyOf(await get(server.url, l))).toBe('{"next":true}');
    expect(server.connections()).toBe(2);
  });

  it('fails a head over its bound, whether it comes at once or never ends, without holding more', async () => {
    const huge = `HTTP/1.1 200 OK\r\nx-big: ${'a'.repeat(MAX_HEAD_BYTES)}\r\ncontent-length: 2\r\n\r\n{}`;
    server = await rawServer((s, _h, i) => {
      if (i === 0) s.write(huge);
      else {
        // Endless: header lines forever, a few bytes at a time.
        s.write('HTTP/1.1 200 OK\r\n');
        const timer = setInterval(() => (s.destroyed ? clearInterval(timer) : s.write(`x-more: ${'b'.repeat(500)}\r\n`)), 1);
      }
    });
    const l = lender();
    expect((await failure(get(server.url, l))).message).toMatch(/head passed 16384 bytes/u);
    expect((await failure(get(server.url, l))).message).toMatch(/head passed 16384 bytes/u);
    expect(l.out).toBe(0);
  });

  it('gives a body over the bound back unread when declared, and stops a chunked one as it passes', async () => {
    server = await rawServer((s, _h, i) => {
      if (i === 0) s.write('HTTP/1.1 200 OK\r\ncontent-length: 5000000\r\n\r\n');
      else s.write(`HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${'fff'}\r\n${'y'.repeat(0xfff)}\r\nffffffffff\r\n`);
    });
    const l = lender();
    const declared = await get(server.url, l, { cap: 1 << 20 });
    expect(declared.body).toEqual({ kind: 'lent', answer: { kind: 'over-cap', bytes: 5_000_000, declared: true } });
    const chunked = await get(server.url, l, { cap: 1 << 20 });
    expect(chunked.body.kind === 'lent' && chunked.body.answer.kind).toBe('over-cap');
    expect(l.out).toBe(0);
  });

  it('gives up a body that stalls, and rejects as an abort when the caller aborts', async () => {
    server = await rawServer((s) => s.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{"a"'));
    const l = lender();
    expect((await failure(get(server.url, l, { stallMs: 100 }))).message).toMatch(/stalled for 100 ms/u);
    const ctrl = new AbortController();
    setTimeout(() => ctrl.abort(), 50);
    const aborted = await failure(bufferedFetch(1 << 20, { lend: l.lend, stallTimeoutMs: 5_000 })(server.url, { signal: ctrl.signal }));
    expect(aborted.name).toBe('AbortError');
    expect(l.out).toBe(0);
  });

  it('reads a large body without a buffer per read: the bytes go from one read buffer to the lent one', async () => {
    const size = 24 * 1024 * 1024;
    const payload = Buffer.alloc(size, 0x61);
    server = await rawServer((s) => {
      s.write(`HTTP/1.1 200 OK\r\ncontent-length: ${size}\r\n\r\n`);
      s.write(payload);
    });
    const target = Buffer.alloc(size);
    const lend = (n: number): LentBody => ({ bytes: target.subarray(0, n), done: () => {} });
    const before = process.memoryUsage().arrayBuffers;
    const a = await leanRequest({
      method: 'GET',
      url: new URL(server.url),
      headers: {},
      signal: undefined,
      capBytes: size,
      pages: { lend, stallTimeoutMs: 5_000 },
    });
    const grown = process.memoryUsage().arrayBuffers - before;
    expect(a.body.kind === 'lent' && a.body.answer.kind === 'body' && a.body.answer.body.bytes.equals(payload)).toBe(true);
    // Node's own client would hold a fresh buffer per 64 KiB read here until the next collection.
    expect(grown).toBeLessThan(size / 8);
  });
});
