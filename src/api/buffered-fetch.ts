import type Anthropic from '@anthropic-ai/sdk';
import { leanRequest, LeanRequestError, type LeanAnswer, type LentAnswer, type PageFetchOptions } from './lean-http.js';

/**
 * A `fetch` for small JSON requests (memory writes, tool results, work calls) and listing pages,
 * over the lean HTTP/1.1 client of lean-http.ts (kept-alive connections, each reading into one
 * reused buffer): the whole answer is read into one buffer (at most `maxBodyBytes`) before the
 * `Response` is handed back, to be read with `text()`/`json()` (its `body` is null). It costs the
 * main thread a fraction of what the WHATWG `fetch` does per request, which is what bounds many
 * small requests in flight.
 *
 * It behaves as `fetch` does where the SDK relies on it:
 * - an abort of `init.signal` (the SDK's timeout or the caller's signal) drops the connection and
 *   rejects with an `AbortError`;
 * - no answer (refused, reset, DNS, an untrusted certificate), a malformed one, or one over
 *   `maxBodyBytes` rejects with a `TypeError` whose `cause` is the failure (the SDK reports a
 *   connection error; a write may or may not have been applied);
 * - redirects are not followed (the API answers in place; a 3xx is a failed request).
 *
 * With `pages`, a successful GET's body is read into a buffer `pages.lend` gives, found on the
 * response with {@link takeLentBody}.
 *
 * It is used only for a client whose transport is the runtime's default: see {@link withBufferedFetch}
 * and {@link withBufferedPosts}.
 */

/** Statuses whose answer has no body (a `Response` refuses one). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

export type { LentAnswer, LentBody, PageFetchOptions } from './lean-http.js';

const LENT = Symbol('lentBody');

/**
 * The body a response of {@link bufferedFetch} (with a lender) read into a lent buffer, once:
 * the caller owns it and gives it back; or why it was not read (over the bound: the request is
 * not retried, so a hostile answer is read once). Undefined for any other response (another
 * transport): read its body as usual.
 */
export function takeLentBody(res: Response): LentAnswer | undefined {
  const own = res as unknown as { [LENT]?: LentAnswer };
  const answer = own[LENT];
  own[LENT] = undefined;
  return answer;
}

export function bufferedFetch(maxBodyBytes: number, pages?: PageFetchOptions): typeof fetch {
  return async (input, init = {}) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const body = init.body;
    const plainBody = body === undefined || body === null || typeof body === 'string' || body instanceof Uint8Array;
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !plainBody) {
      // Anything else (another scheme, a streamed or form body) goes to the runtime's fetch.
      return fetch(input, init);
    }
    const signal = init.signal ?? undefined;
    if (signal?.aborted) throw abortError();
    const method = (init.method ?? 'GET').toUpperCase();
    let answer: LeanAnswer;
    try {
      answer = await leanRequest({
        method,
        url,
        headers: headerObject(init.headers),
        body: typeof body === 'string' ? Buffer.from(body, 'utf8') : (body ?? undefined),
        signal,
        capBytes: maxBodyBytes,
        pages: method === 'GET' ? pages : undefined,
      });
    } catch (e) {
      if (signal?.aborted === true || (e instanceof LeanRequestError && e.aborted)) throw abortError();
      // The socket's own error (a refused connection, an untrusted certificate) as the cause, as fetch gives it.
      throw fetchFailed(e instanceof LeanRequestError && e.cause !== undefined ? e.cause : e);
    }
    return asResponse(answer);
  };
}

/** An answer as the `Response` the SDK reads: its lent body (if any) found by {@link takeLentBody}. */
function asResponse(answer: LeanAnswer): Response {
  const lent = answer.body.kind === 'lent' ? answer.body.answer : undefined;
  try {
    const h = new Headers();
    for (let i = 0; i + 1 < answer.rawHeaders.length; i += 2) h.append(answer.rawHeaders[i]!, answer.rawHeaders[i + 1]!);
    const bytes = answer.body.kind === 'bytes' ? answer.body.bytes : null;
    const response = new BufferedResponse(NULL_BODY_STATUSES.has(answer.status) ? null : bytes, {
      status: answer.status,
      statusText: answer.statusText,
      headers: h,
    });
    if (lent !== undefined) (response as unknown as { [LENT]?: LentAnswer })[LENT] = lent;
    // A real Response (its class extends the platform's), typed through a narrower base.
    return response as unknown as Response;
  } catch (e) {
    // A status or header a Response cannot hold: a malformed answer.
    if (lent?.kind === 'body') lent.body.done();
    throw fetchFailed(e);
  }
}

/**
 * A `Response` over bytes already read, for a caller that reads it through `text()`, `json()`,
 * `arrayBuffer()` or `blob()` (the SDK parsing an answer): those answer from the buffer, and
 * `body` is null, as no stream is built (building one is most of what a `Response` over bytes
 * costs). Its users (memory writes, posts) never stream an answer.
 */
// Typed as its plain fields only: the platform types declare the body methods as properties, which
// a subclass cannot override with methods.
const ResponseBase = Response as unknown as new (
  body: null,
  init: ResponseInit,
) => { readonly status: number; readonly statusText: string; readonly headers: Headers };

class BufferedResponse extends ResponseBase {
  readonly #bytes: Buffer | null;
  #used = false;

  constructor(bytes: Buffer | null, init: ResponseInit) {
    super(null, init);
    this.#bytes = bytes;
  }

  get bodyUsed(): boolean {
    return this.#used;
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

  #take(): Buffer {
    if (this.#used) throw new TypeError('Body is unusable: the body has already been read');
    this.#used = true;
    if (this.#bytes !== null) return this.#bytes;
    // A body read into a lent buffer and read the usual way after all: copied, and given back.
    const lent = takeLentBody(this as unknown as Response);
    if (lent?.kind !== 'body') return Buffer.alloc(0);
    const copy = Buffer.from(lent.body.bytes);
    lent.body.done();
    return copy;
  }
}

/**
 * `client` itself, or a copy of it whose requests go through {@link bufferedFetch}: only when the
 * client uses the runtime's default transport (no `fetch` or `fetchOptions` of its own, and the
 * runtime's global dispatcher is a plain agent, not a proxy or a mock), so an app that routes its
 * requests somewhere keeps doing so.
 */
export function withBufferedFetch(client: Anthropic, maxBodyBytes: number): Anthropic {
  return copyWithFetch(client, () => bufferedFetch(maxBodyBytes));
}

/**
 * `client` itself, or a copy of it (under the same conditions as {@link withBufferedFetch}) whose
 * requests go through {@link bufferedFetch} with `pages`: a successful answer's body is read into
 * a buffer `pages.lend` gives, found on the response with {@link takeLentBody}. For listing pages:
 * a page costs the main thread less than the WHATWG `fetch` and its stream do, and its bytes are
 * copied once, from the connection's read buffer into the buffer they stay in until used.
 */
export function withPageFetch(client: Anthropic, maxBodyBytes: number, pages: PageFetchOptions): Anthropic {
  return copyWithFetch(client, () => bufferedFetch(maxBodyBytes, pages));
}

/**
 * `client` itself, or a copy of it (under the same conditions as {@link withBufferedFetch}) whose
 * requests other than GET and HEAD go through {@link bufferedFetch}: the small JSON posts a worker
 * sends many of (tool results, acknowledgements, heartbeats, stops). Reads stay on the runtime's
 * `fetch`: the event stream, the history and listings are streamed or read with bounds.
 */
export function withBufferedPosts(client: Anthropic, maxBodyBytes: number): Anthropic {
  return copyWithFetch(client, () => {
    const buffered = bufferedFetch(maxBodyBytes);
    return (input, init) => {
      const method = init?.method?.toUpperCase() ?? 'GET';
      return method === 'GET' || method === 'HEAD' ? fetch(input, init) : buffered(input, init);
    };
  });
}

function copyWithFetch(client: Anthropic, makeFetch: () => typeof fetch): Anthropic {
  const own = client as unknown as { fetch?: unknown; fetchOptions?: unknown };
  if (own.fetch !== globalThis.fetch) return client;
  if (own.fetchOptions !== undefined && own.fetchOptions !== null && Object.keys(own.fetchOptions).length > 0) return client;
  if (!defaultDispatcher()) return client;
  // A client (of another SDK copy) that cannot be copied with another fetch keeps its own.
  if (typeof (client as { withOptions?: unknown }).withOptions !== 'function') return client;
  try {
    return client.withOptions({ fetch: makeFetch() });
  } catch {
    return client;
  }
}

/** True when the global dispatcher the runtime's `fetch` uses is unset or a plain `Agent`. */
function defaultDispatcher(): boolean {
  const dispatcher = (globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalDispatcher.1')];
  if (dispatcher === undefined) return true;
  return typeof dispatcher === 'object' && dispatcher !== null && dispatcher.constructor?.name === 'Agent';
}

function headerObject(headers: RequestInit['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  if (headers === undefined || headers === null) return out;
  (headers instanceof Headers ? headers : new Headers(headers)).forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

function abortError(): Error {
  return new DOMException('This operation was aborted', 'AbortError');
}

function fetchFailed(cause: unknown): TypeError {
  return new TypeError('fetch failed', { cause });
}
