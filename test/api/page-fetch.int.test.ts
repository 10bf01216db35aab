/**
 * Pins the listing-page transport over real HTTP (a plain server on 127.0.0.1 playing a wrong or
 * hostile API): a successful answer's body lands in one buffer the caller lends, of its declared
 * length or of what a chunked body weighed; a body over the bound is not read (nor asked for again),
 * and a compressed one is bounded by what it decodes to; a body that stalls, is cut, or is aborted
 * fails as the runtime fetch would, and every buffer lent is given back; an error answer still
 * reaches the SDK with its message. The SDK's client keeps the `fetch` it was built with on the
 * instance (a private member): the first test fails if it goes.
 */
import * as http from 'node:http';
import * as zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { isRuntimeFetch, usesRuntimeFetch, withPageFetch } from '../../src/api/page-fetch.js';
import { takeBufferedBytes, takeLentBody, type LentBody } from '../../src/api/page-response.js';
import { readBodyCapped } from '../../src/memory/remote/bounded-body.js';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

let server: http.Server;
let handler: Handler;
let requests = 0;
let baseURL = '';
beforeEach(async () => {
  requests = 0;
  server = http.createServer((req, res) => {
    requests++;
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(async () => {
  vi.restoreAllMocks();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** A lender that counts what it lent and what came back. */
function lender(): { lend: (n: number) => LentBody; lent: number[]; back: number } {
  const out = { lent: [] as number[], back: 0, lend: (n: number): LentBody => ({ bytes: Buffer.alloc(n), done: () => void out.back++ }) };
  out.lent = [];
  return out;
}

function listing(cap: number, l: ReturnType<typeof lender>, stallTimeoutMs = 5_000, signal?: AbortSignal): Promise<Response> {
  const client = withPageFetch(new Anthropic({ apiKey: 'sk-test', baseURL, maxRetries: 2, logLevel: 'off' }), cap, {
    lend: (n: number) => {
      l.lent.push(n);
      return l.lend(n);
    },
    stallTimeoutMs,
  });
  return client.beta.memoryStores.memories.list('memstore_x', { view: 'full' }, signal ? { signal } : {}).asResponse();
}

const BODY = JSON.stringify({ data: [{ type: 'memory', id: 'mem_1', path: '/a.md', content: 'é'.repeat(40_000) }], next_page: null });

describe('the page transport', () => {
  it("recognises the runtime's fetch on a client built with it, and nothing else", () => {
    expect(isRuntimeFetch(globalThis.fetch)).toBe(true);
    expect(usesRuntimeFetch(new Anthropic({ apiKey: 'sk-test', baseURL }))).toBe(true);
    const own: typeof fetch = (input, init) => fetch(input, init);
    expect(usesRuntimeFetch(new Anthropic({ apiKey: 'sk-test', baseURL, fetch: own }))).toBe(false);
    const client = new Anthropic({ apiKey: 'sk-test', baseURL, fetch: own });
    expect(withPageFetch(client, 1024, { lend: (n) => ({ bytes: Buffer.alloc(n), done: () => {} }), stallTimeoutMs: 1000 })).toBe(client);
  });

  it('reads a declared-length body into one lent buffer of that length', async () => {
    let acceptEncoding: string | undefined;
    handler = (req, res) => {
      acceptEncoding = req.headers['accept-encoding'];
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(BODY) }).end(BODY);
    };
    const l = lender();
    const res = await listing(1 << 20, l);
    const answer = takeLentBody(res);
    expect(answer?.kind).toBe('body');
    if (answer?.kind !== 'body') return;
    expect(answer.body.bytes.toString('utf8')).toBe(BODY);
    expect(l.lent).toEqual([Buffer.byteLength(BODY)]);
    expect(acceptEncoding).toBe('gzip, br');
    // Taken once: a second look finds nothing.
    expect(takeLentBody(res)).toBeUndefined();
  });

  it('reads a chunked body (no declared length) into a buffer of what it weighed', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const bytes = Buffer.from(BODY);
      for (let at = 0; at < bytes.length; at += 7000) res.write(bytes.subarray(at, at + 7000));
      res.end();
    };
    const l = lender();
    const answer = takeLentBody(await listing(1 << 20, l));
    expect(answer?.kind === 'body' && answer.body.bytes.toString('utf8')).toBe(BODY);
    // Read into lent buffers that grow as it comes (each given back), handed on in one of its weight.
    expect(l.lent.at(-1)).toBe(Buffer.byteLength(BODY));
    expect(l.back).toBe(l.lent.length - 1);
  });

  it('does not read, nor ask again for, a body whose declared length is over the bound', async () => {
    handler = (_req, res) => res.writeHead(200, { 'content-length': 5_000_000 }).end(Buffer.alloc(5_000_000, 0x20));
    const l = lender();
    const answer = takeLentBody(await listing(1 << 20, l));
    expect(answer).toEqual({ kind: 'over-cap', bytes: 5_000_000, declared: true });
    expect(l.lent).toEqual([]);
    expect(requests).toBe(1);
  });

  it('stops reading a chunked body once it passes the bound, and is not retried', async () => {
    handler = (_req, res) => {
      res.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const more = (n: number): void => {
        if (n === 0 || res.destroyed) return void res.end();
        res.write(chunk, () => more(n - 1));
      };
      more(100);
    };
    const l = lender();
    const answer = takeLentBody(await listing(256 * 1024, l));
    expect(answer?.kind).toBe('over-cap');
    expect(answer?.kind === 'over-cap' && answer.bytes).toBeGreaterThan(256 * 1024);
    expect(requests).toBe(1);
    expect(l.back).toBe(l.lent.length);
  });

  it.each([
    ['gzip', (b: Buffer) => zlib.gzipSync(b)],
    ['br', (b: Buffer) => zlib.brotliCompressSync(b)],
  ] as const)('decodes a %s body into a lent buffer of its decoded length', async (coding, encode) => {
    const wire = encode(Buffer.from(BODY));
    handler = (_req, res) => res.writeHead(200, { 'content-encoding': coding, 'content-length': wire.length }).end(wire);
    const l = lender();
    const answer = takeLentBody(await listing(1 << 20, l));
    expect(answer?.kind === 'body' && answer.body.bytes.toString('utf8')).toBe(BODY);
    expect(l.lent.at(-1)).toBe(Buffer.byteLength(BODY));
    expect(l.back).toBe(l.lent.length - 1);
  });

  it('refuses a gzip body that decodes past the bound as a plain one, though its wire size is small', async () => {
    const wire = zlib.gzipSync(Buffer.alloc(8 * 1024 * 1024, 0x20));
    expect(wire.length).toBeLessThan(64 * 1024);
    handler = (_req, res) => res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': wire.length }).end(wire);
    const l = lender();
    const answer = takeLentBody(await listing(256 * 1024, l));
    expect(answer?.kind).toBe('over-cap');
    expect(answer?.kind === 'over-cap' && answer.declared).toBe(false);
    expect(answer?.kind === 'over-cap' && answer.bytes).toBeGreaterThan(256 * 1024);
    expect(requests).toBe(1);
    expect(l.back).toBe(l.lent.length);
  });

  it('fails an answer in an encoding it did not ask for', async () => {
    handler = (_req, res) => res.writeHead(200, { 'content-encoding': 'zstd', 'content-length': 4 }).end('abcd');
    const l = lender();
    const err = await listing(1 << 20, l).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ name: 'APIConnectionError' });
    expect(l.back).toBe(l.lent.length);
  });

  it('gives up a body that stalls, as a lost connection', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-length': 1000 });
      res.write('{"data":');
    };
    const l = lender();
    const err = await listing(1 << 20, l, 150).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ name: 'APIConnectionError' });
    expect(String((err as { cause?: { cause?: unknown } }).cause?.cause ?? (err as { cause?: unknown }).cause)).toMatch(
      /stalled for 150 ms/,
    );
    // Asked again by the SDK (a lost connection is retried), and each lent buffer came back.
    expect(requests).toBeGreaterThanOrEqual(2);
    expect(l.lent).toEqual(Array.from({ length: requests }, () => 1000));
    expect(l.back).toBe(requests);
  });

  it('fails an answer cut before its declared end, and gives its buffer back', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-length': 1000 });
      res.write('{"data":[', () => res.destroy());
    };
    const l = lender();
    await expect(listing(1 << 20, l)).rejects.toMatchObject({ name: 'APIConnectionError' });
    expect(l.back).toBe(l.lent.length);
    expect(l.lent.length).toBeGreaterThan(0);
  });

  it('rejects as an abort when the caller aborts during the body, and gives its buffer back', async () => {
    const ctrl = new AbortController();
    handler = (_req, res) => {
      res.writeHead(200, { 'content-length': 1000 });
      res.write('{"data":', () => setTimeout(() => ctrl.abort(), 50));
    };
    const l = lender();
    await expect(listing(1 << 20, l, 5_000, ctrl.signal)).rejects.toMatchObject({ name: 'APIUserAbortError' });
    await vi.waitFor(() => expect(l.back).toBe(1));
    expect(requests).toBe(1);
  });

  it('hands an error answer to the SDK with its status and message, reading no lent buffer', async () => {
    const body = JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'no such store' } });
    handler = (_req, res) =>
      res.writeHead(404, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
    const l = lender();
    await expect(listing(1 << 20, l)).rejects.toMatchObject({ status: 404, message: expect.stringMatching(/no such store/) });
    expect(l.lent).toEqual([]);
  });
  it("hands a write answer read whole to the bounded reader as its bytes, once, still within the reader's bound", async () => {
    const body = JSON.stringify({ type: 'memory', id: 'mem_1', path: '/a.md', content: 'é'.repeat(3_000) });
    handler = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    const client = (): Anthropic =>
      withPageFetch(new Anthropic({ apiKey: 'sk-test', baseURL, maxRetries: 0, logLevel: 'off' }), 1 << 20, { stallTimeoutMs: 5_000 });
    const write = (): Promise<Response> =>
      client().beta.memoryStores.memories.create('memstore_x', { path: '/a.md', content: 'x' }).asResponse();
    const res = await write();
    expect(await readBodyCapped(res, { capBytes: 1 << 20, timeoutMs: 5_000 })).toBe(body);
    // Taken once: the body is used, and a second take finds nothing.
    expect(res.bodyUsed).toBe(true);
    expect(takeBufferedBytes(res)).toBeUndefined();
    // The reader's own bound holds on bytes read whole, though the transport's was larger.
    await expect(readBodyCapped(await write(), { capBytes: 1_000, timeoutMs: 5_000 })).rejects.toMatchObject({ limit: 'body-size' });
    // A response of another transport is not taken.
    expect(takeBufferedBytes(new Response(body))).toBeUndefined();
  });
});
