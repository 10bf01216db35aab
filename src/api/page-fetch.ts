/**
 * The transport of listing pages and memory writes: a `fetch` for the SDK over undici's
 * `dispatch()`, and the SDK client that uses it. Only the read differs from the runtime's `fetch`:
 * every request goes through the dispatcher the app chose (`dispatcher-choice.ts`), and a
 * successful answer's body is copied straight into a buffer the caller lends (`answer-reader.ts`),
 * which the caller takes from the response (`page-response.ts`). Answers are asked for compressed
 * (`gzip`, `br`).
 *
 * A client with a `fetch` of its own (a mock, an instrumented wrapper) is left alone: its pages are
 * read from its own responses (see `readBodyToPage`).
 */
import type Anthropic from '@anthropic-ai/sdk';
import type { Dispatcher } from 'undici';
import { abortError, AnswerReader, fetchFailed, type PageFetchOptions } from './answer-reader.js';
import { dispatcherFor } from './dispatcher-choice.js';

/**
 * `client` itself when it has a `fetch` of its own, else a copy of it whose requests go through
 * {@link pageFetch}. With `pages.lend` (listing pages), the caller reads every 2xx body with
 * `takeLentBody` (`page-response.ts`); without it (memory writes), every answer is read whole, within
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
 * Make the transport ready now, so a worker pays for it when it starts rather than inside its
 * first session's mount (the SDK's first poll would load the runtime's `fetch` a moment later).
 */
export function preloadPageTransport(): void {
  dispatcherFor(undefined);
}

/**
 * A `fetch` over undici's `dispatch()`: a 2xx body lands in one buffer `pages.lend` gives (found on
 * the response with `takeLentBody`); any other answer's body (at most `maxBodyBytes`) is
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
    let target: URL;
    try {
      target = new URL(url);
    } catch (e) {
      throw fetchFailed(e);
    }
    return new Promise<Response>((resolve, reject) => {
      const reader = new AnswerReader(maxBodyBytes, pages, signal, resolve, reject);
      try {
        dispatcherFor(init).dispatch(
          {
            origin: target.origin,
            path: `${target.pathname}${target.search}`,
            method: (init.method ?? 'GET').toUpperCase() as Dispatcher.HttpMethod,
            headers,
            body: body ?? null,
            headersTimeout: pages.stallTimeoutMs,
            bodyTimeout: pages.stallTimeoutMs,
          },
          reader,
        );
      } catch (e) {
        reader.onError(e as Error);
      }
    });
  };
}

function headerObject(headers: RequestInit['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  if (headers === undefined || headers === null) return out;
  (headers instanceof Headers ? headers : new Headers(headers)).forEach((value, name) => {
    out[name] = value;
  });
  return out;
}
