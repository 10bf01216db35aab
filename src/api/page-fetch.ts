/**
 * The transport of listing pages: a `fetch` for the SDK whose successful answers are read with
 * undici's `request()` straight into a buffer the caller lends (a pooled page buffer), never into a
 * WHATWG stream and a second copy. Only the read differs from the runtime's `fetch`: every request
 * goes through the dispatcher the app chose, so a proxy agent, an `Agent` trusting a private CA or a
 * `MockAgent` sees listing pages as it sees every other request.
 *
 * Which dispatcher, in order: the one the client's `fetchOptions` carry; else the process's global
 * dispatcher (what the runtime's `fetch` uses); else an agent of this module's own, which is never
 * installed globally. A client with a `fetch` of its own (a mock, an instrumented wrapper) is left
 * alone: its pages are read from its own responses (see `readBodyToPage`).
 *
 * Answers are asked for compressed (`gzip`, `br`) and decoded as they are read; the page bound
 * applies to the decoded bytes, so a small compressed answer that inflates past it is refused as a
 * plain one of that size would be.
 */
import type { Readable } from 'node:stream';
import * as zlib from 'node:zlib';
import type Anthropic from '@anthropic-ai/sdk';
import type { Agent, Dispatcher } from 'undici';
import { undiciParts } from './undici-parts.js';

/** A buffer lent for a body: `bytes` is exactly the body's length; `done` gives it back. */
export interface LentBody {
  readonly bytes: Buffer;
  done(): void;
}

/** How a successful answer's body is read: into a buffer the caller lends, or (no `lend`) one of its own. */
export interface PageFetchOptions {
  /** A buffer of exactly `length` bytes. Absent: every body is read into a buffer of the answer's own. */
  lend?(length: number): LentBody;
  /** Milliseconds without a byte of the head or the body before the request fails as a lost connection. */
  stallTimeoutMs: number;
}

/** A successful answer's body: read into a lent buffer, or not read because it passed the bound. */
export type LentAnswer = { kind: 'body'; body: LentBody } | { kind: 'over-cap'; bytes: number; declared: boolean };

const LENT = Symbol('lentBody');
const GLOBAL_DISPATCHER = Symbol.for('undici.globalDispatcher.1');
/** Statuses whose answer has no body (a `Response` refuses one). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
/** The first lent buffer of a body of unknown length; it doubles as it fills. */
const GROWING_START_BYTES = 64 * 1024;

/**
 * The body a page response read into a lent buffer, once: the caller owns it and gives it back; or
 * why it was not read (over the bound: the request is not retried, so a hostile answer is read
 * once). Undefined for any other response (another transport): read its body as usual.
 */
export function takeLentBody(res: Response): LentAnswer | undefined {
  const own = res as unknown as { [LENT]?: LentAnswer };
  const answer = own[LENT];
  own[LENT] = undefined;
  return answer;
}

/**
 * The bytes of an answer this transport already read whole (an error's body, a write's answer),
 * taken once: the response's body is then used. Undefined for any other response, or one whose
 * body was read or went into a lent buffer: read it as usual.
 */
export function takeBufferedBytes(res: Response): Buffer | undefined {
  return res instanceof BufferedResponse ? res.takeBytes() : undefined;
}

/**
 * `client` itself when it has a `fetch` of its own, else a copy of it whose requests go through
 * {@link pageFetch}. With `pages.lend` (listing pages), the caller reads every 2xx body with
 * {@link takeLentBody}; without it (memory writes), every answer is read whole, within
 * `maxBodyBytes`, into a buffer of its own.
 */
export function withPageFetch(client: Anthropic, maxBodyBytes: number, pages: PageFetchOptions): Anthropic {
  if (!usesRuntimeFetch(client)) return client;
  // A client (of another SDK copy) that cannot be copied with another fetch keeps its own.
  if (typeof (client as { withOptions?: unknown }).withOptions !== 'function') return client;
  try {
    return client.withOptions({ fetch: pageFetch(maxBodyBytes, pages) });
  } catch {
    return client;
  }
}

/**
 * True when the client's `fetch` is the runtime's own. The SDK keeps the `fetch` it was built with
 * on the instance (a member its types mark private; `test/api/page-fetch.int.test.ts` fails if it
 * goes); a `fetch` the app gave it, or a global `fetch` mocked before it was built, is not the
 * runtime's, and is used as it is.
 */
export function usesRuntimeFetch(client: Anthropic): boolean {
  const own = (client as unknown as { fetch?: unknown }).fetch;
  return typeof own === 'function' && isRuntimeFetch(own);
}

/** Node's own `fetch`, told from a replacement by its source's first line (the same from Node 18 on). */
export function isRuntimeFetch(f: unknown): boolean {
  if (typeof f !== 'function') return false;
  return /^function fetch\(input, init = undefined\)/.test(Function.prototype.toString.call(f));
}

/**
 * Load the transport's modules now (about 40 ms of CPU on this project's test VM), so a worker
 * pays for them when it starts rather than inside its first session's mount.
 */
export function preloadPageTransport(): void {
  undiciParts();
}

let ownAgent: Agent | undefined;

/** The dispatcher a request goes through: the client's, else the process's, else this module's own. */
export function dispatcherFor(init: RequestInit | undefined): Dispatcher {
  const given = (init as { dispatcher?: unknown } | undefined)?.dispatcher;
  if (isDispatcher(given)) return given;
  const global = (globalThis as Record<symbol, unknown>)[GLOBAL_DISPATCHER];
  if (isDispatcher(global)) return global;
  ownAgent ??= new (undiciParts().Agent)();
  return ownAgent;
}

function isDispatcher(value: unknown): value is Dispatcher {
  return typeof value === 'object' && value !== null && typeof (value as { dispatch?: unknown }).dispatch === 'function';
}

/**
 * A `fetch` over undici's `request()`: a 2xx body lands in one buffer `pages.lend` gives (found on
 * the response with {@link takeLentBody}); any other answer's body (at most `maxBodyBytes`) is
 * read into a buffer of its own for the SDK to read its error. It behaves as `fetch` does where the
 * SDK relies on it: an abort rejects with an `AbortError`; no answer, a malformed one or one over
 * the bound rejects with a `TypeError` whose `cause` says why; redirects are not followed.
 */
export function pageFetch(maxBodyBytes: number, pages: PageFetchOptions): typeof fetch {
  return async (input, init = {}) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const body = init.body;
    if (body !== undefined && body !== null && typeof body !== 'string' && !(body instanceof Uint8Array)) {
      // A streamed or form body (never a listing page's): the runtime's fetch.
      return fetch(input, init);
    }
    const signal = init.signal ?? undefined;
    if (signal?.aborted) throw abortError();
    const headers = headerObject(init.headers);
    headers['accept-encoding'] ??= 'gzip, br';
    let answer: Dispatcher.ResponseData;
    try {
      const target = new URL(url);
      answer = await undiciParts().request.call(dispatcherFor(init), {
        origin: target.origin,
        path: `${target.pathname}${target.search}`,
        method: (init.method ?? 'GET').toUpperCase() as Dispatcher.HttpMethod,
        headers,
        body: body ?? null,
        signal,
        headersTimeout: pages.stallTimeoutMs,
        bodyTimeout: pages.stallTimeoutMs,
      });
    } catch (e) {
      throw signal?.aborted === true ? abortError() : fetchFailed(stalled(e, pages.stallTimeoutMs));
    }
    // A body given up (over the bound, a failure) is destroyed: its error then has no reader left.
    answer.body.on('error', () => {});
    try {
      return await readAnswer(answer, maxBodyBytes, pages);
    } catch (e) {
      answer.body.destroy();
      throw signal?.aborted === true ? abortError() : fetchFailed(stalled(e, pages.stallTimeoutMs));
    }
  };
}

/** The answer as the `Response` the SDK reads. */
async function readAnswer(answer: Dispatcher.ResponseData, maxBodyBytes: number, pages: PageFetchOptions): Promise<Response> {
  const coding = contentCoding(answer.headers['content-encoding']);
  const source = decoded(answer.body, coding);
  const declared = coding === 'identity' ? declaredLength(answer.headers['content-length']) : undefined;
  const status = answer.statusCode;
  const responseHeaders = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value === undefined) continue;
    // A decoded body has neither its coding nor its wire length any more.
    if (coding !== 'identity' && (name === 'content-encoding' || name === 'content-length')) continue;
    for (const v of Array.isArray(value) ? value : [value]) responseHeaders.append(name, v);
  }
  const init = { status, headers: responseHeaders };
  if (NULL_BODY_STATUSES.has(status)) {
    source.destroy();
    return new BufferedResponse(null, init) as unknown as Response;
  }
  if (status < 200 || status >= 300) {
    const bytes = await readPlain(source, maxBodyBytes);
    return new BufferedResponse(bytes, init) as unknown as Response;
  }
  if (pages.lend === undefined) {
    const bytes = await readPlain(source, maxBodyBytes);
    return new BufferedResponse(bytes, init) as unknown as Response;
  }
  const lent = await readLent(source, declared, maxBodyBytes, pages.lend);
  const response = new BufferedResponse(null, init);
  (response as unknown as { [LENT]?: LentAnswer })[LENT] = lent;
  return response as unknown as Response;
}

/** The body as the caller lends for it: in place when its length is declared, else in a buffer that doubles. */
async function readLent(
  source: Readable,
  declared: number | undefined,
  cap: number,
  lend: (length: number) => LentBody,
): Promise<LentAnswer> {
  if (declared !== undefined && declared > cap) {
    source.destroy();
    return { kind: 'over-cap', bytes: declared, declared: true };
  }
  let lent: LentBody | undefined = declared !== undefined ? lend(declared) : undefined;
  let at = 0;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      if (at + chunk.length > cap) {
        source.destroy();
        lent?.done();
        lent = undefined;
        return { kind: 'over-cap', bytes: at + chunk.length, declared: false };
      }
      if (declared !== undefined) {
        if (at + chunk.length > declared) throw new AnswerProblem(`the body passed its declared length of ${declared} bytes`);
      } else if (lent === undefined || at + chunk.length > lent.bytes.length) {
        const need = at + chunk.length;
        const next = lend(Math.min(cap, Math.max(need, 2 * (lent?.bytes.length ?? 0), GROWING_START_BYTES)));
        if (lent !== undefined) {
          lent.bytes.copy(next.bytes, 0, 0, at);
          lent.done();
        }
        lent = next;
      }
      chunk.copy(lent!.bytes, at);
      at += chunk.length;
    }
    if (declared !== undefined && at !== declared) throw new AnswerProblem(`the body ended after ${at} of its declared ${declared} bytes`);
    if (lent === undefined) return { kind: 'body', body: lend(0) };
    if (lent.bytes.length !== at) {
      // A buffer of exactly the body's length, as the caller's pages expect.
      const exact = lend(at);
      lent.bytes.copy(exact.bytes, 0, 0, at);
      lent.done();
      lent = exact;
    }
    return { kind: 'body', body: lent };
  } catch (e) {
    lent?.done();
    throw e;
  }
}

/** An answer the caller does not lend for (an error's body), at most `cap` bytes. */
async function readPlain(source: Readable, cap: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let total = 0;
  for await (const chunk of source as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > cap) {
      source.destroy();
      throw new AnswerProblem(`the answer passed ${cap} bytes, more than it can weigh`);
    }
    parts.push(chunk);
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts, total);
}

type Coding = 'identity' | 'gzip' | 'br' | 'deflate';

function contentCoding(value: string | string[] | undefined): Coding {
  const text = (Array.isArray(value) ? value.join(',') : (value ?? '')).trim().toLowerCase();
  if (text === '' || text === 'identity') return 'identity';
  if (text === 'gzip' || text === 'x-gzip') return 'gzip';
  if (text === 'br') return 'br';
  if (text === 'deflate') return 'deflate';
  throw new AnswerProblem(`the answer is encoded as ${JSON.stringify(text.slice(0, 40))}, which was not asked for`);
}

/** The body's bytes as sent, decoded as they arrive. A decoder's failure fails the read. */
function decoded(body: Readable, coding: Coding): Readable {
  if (coding === 'identity') return body;
  const decoder = coding === 'gzip' ? zlib.createGunzip() : coding === 'br' ? zlib.createBrotliDecompress() : zlib.createInflate();
  body.on('error', (e) => decoder.destroy(e));
  decoder.on('error', () => {});
  decoder.on('close', () => body.destroy());
  return body.pipe(decoder);
}

/** undici's head and body timeouts, said as what they mean here. */
function stalled(e: unknown, ms: number): unknown {
  const code = (e as { code?: unknown } | null)?.code;
  if (code !== 'UND_ERR_HEADERS_TIMEOUT' && code !== 'UND_ERR_BODY_TIMEOUT') return e;
  const part = code === 'UND_ERR_HEADERS_TIMEOUT' ? 'head' : 'body';
  return new AnswerProblem(`the answer's ${part} stalled for ${ms} ms; gave up`, { cause: e });
}

function declaredLength(value: string | string[] | undefined): number | undefined {
  if (typeof value !== 'string' || !/^\d+$/.test(value)) return undefined;
  return Number(value);
}

function headerObject(headers: RequestInit['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  if (headers === undefined || headers === null) return out;
  (headers instanceof Headers ? headers : new Headers(headers)).forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

/** What was wrong with an answer: the cause of the `TypeError` the SDK gets. */
class AnswerProblem extends Error {
  override name = 'AnswerProblem';
}

function abortError(): Error {
  return new DOMException('This operation was aborted', 'AbortError');
}

function fetchFailed(cause: unknown): TypeError {
  return new TypeError('fetch failed', { cause });
}

// Typed as its plain fields only: the platform types declare the body methods as properties, which
// a subclass cannot override with methods.
const ResponseBase = Response as unknown as new (
  body: null,
  init: ResponseInit,
) => { readonly status: number; readonly statusText: string; readonly headers: Headers };

/**
 * A `Response` over bytes already read, for a caller that reads it through `text()`, `json()`,
 * `arrayBuffer()` or `blob()` (the SDK parsing an answer): those answer from the buffer, and `body`
 * is null, as no stream is built. A body read into a lent buffer and then read the usual way after
 * all is copied out, and the buffer given back.
 */
class BufferedResponse extends ResponseBase {
  readonly #bytes: Buffer | null;
  #used = false;
  #stream: ReadableStream<Uint8Array> | undefined;

  constructor(bytes: Buffer | null, init: ResponseInit) {
    super(null, init);
    this.#bytes = bytes;
  }

  get bodyUsed(): boolean {
    return this.#used;
  }

  /** The bytes as a stream, for a caller that reads the body itself (a bounded reader); the same stream on every read. */
  get body(): ReadableStream<Uint8Array> | null {
    if (this.#stream !== undefined) return this.#stream;
    if (this.#bytes === null || this.#used) return null;
    // Built on the bytes, not taking them: the SDK looks at `body` before it reads an answer with `json()`.
    const bytes = this.#bytes;
    this.#stream = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (bytes.length > 0) controller.enqueue(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length));
          controller.close();
        },
      },
      { highWaterMark: 0 },
    );
    return this.#stream;
  }

  async text(): Promise<string> {
    return this.#take().toString('utf8');
  }

  async json(): Promise<unknown> {
    return JSON.parse(this.#take().toString('utf8')) as unknown;
  }

  async arrayBuffer(): Promise<ArrayBuffer> {
    const b = this.#take();
    return b.buffer.slice(b.byteOffset, b.byteOffset + b.length) as ArrayBuffer;
  }

  async blob(): Promise<Blob> {
    return new Blob([this.#take()], { type: this.headers.get('content-type') ?? '' });
  }

  clone(): BufferedResponse {
    if (this.#used) throw new TypeError('Response.clone: the body has already been read');
    const lent = (this as unknown as { [LENT]?: LentAnswer })[LENT];
    const bytes = this.#bytes ?? (lent?.kind === 'body' ? Buffer.from(lent.body.bytes) : null);
    return new BufferedResponse(bytes, { status: this.status, statusText: this.statusText, headers: new Headers(this.headers) });
  }

  /**
   * The whole body, once, when it was read into bytes of its own and nobody reads its stream (the
   * SDK looks at `body` without reading it); a stream handed out unread is cancelled, so nothing
   * reads the bytes twice.
   */
  takeBytes(): Buffer | undefined {
    if (this.#used || this.#bytes === null) return undefined;
    if (this.#stream !== undefined) {
      if (this.#stream.locked) return undefined;
      void this.#stream.cancel().catch(() => {});
    }
    this.#used = true;
    return this.#bytes;
  }

  #take(): Buffer {
    if (this.#used) throw new TypeError('Body is unusable: the body has already been read');
    this.#used = true;
    if (this.#bytes !== null) return this.#bytes;
    const lent = takeLentBody(this as unknown as Response);
    if (lent?.kind !== 'body') return Buffer.alloc(0);
    const copy = Buffer.from(lent.body.bytes);
    lent.body.done();
    return copy;
  }
}
