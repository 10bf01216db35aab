/**
 * One answer of the page transport, read as undici's `dispatch()` hands it over: a successful
 * answer's body is copied chunk by chunk straight into a buffer the caller lends (a pooled page
 * buffer), never into a stream and a second copy; any other answer's body is read whole, within the
 * bound, into a buffer of its own for the SDK to read its error.
 *
 * A compressed answer (`gzip`, `br`, `deflate`) is decoded as it is read; the page bound applies to
 * the decoded bytes, so a small compressed answer that inflates past it is refused as a plain one
 * of that size would be. Failures take the shape the runtime's `fetch` gives them: an abort is an
 * `AbortError`; no answer, a malformed one or one over the bound is a `TypeError` whose `cause`
 * says why.
 */
import * as zlib from 'node:zlib';
import type { Dispatcher } from 'undici';
import { attachLentAnswer, BufferedResponse, type LentBody } from './page-response.js';

/** How a successful answer's body is read: into a buffer the caller lends, or (no `lend`) one of its own. */
export interface PageFetchOptions {
  /** A buffer of exactly `length` bytes. Absent: every body is read into a buffer of the answer's own. */
  lend?(length: number): LentBody;
  /** Milliseconds without a byte of the head or the body before the request fails as a lost connection. */
  stallTimeoutMs: number;
}

/** Statuses whose answer has no body (a `Response` refuses one). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
/** The first lent buffer of a body of unknown length; it doubles as it fills. */
const GROWING_START_BYTES = 64 * 1024;

/** Where an answer's body goes: nowhere (a status without one), a buffer of its own, or a lent one. */
type Sink = 'none' | 'plain' | 'lent';

/**
 * One answer, read as undici hands it over. Each chunk is copied before `onData` returns and the
 * connection is never paused: the library's own agent reads into one buffer it reuses (see
 * `own-agent.ts`). A failure or an abort settles the answer at once and tears the request down.
 */
export class AnswerReader implements Dispatcher.DispatchHandlers {
  readonly #cap: number;
  readonly #pages: PageFetchOptions;
  readonly #signal: AbortSignal | undefined;
  readonly #resolve: (r: Response) => void;
  readonly #reject: (e: unknown) => void;
  readonly #onAbort = (): void => this.#fail(abortError());
  #abort: ((reason: Error) => void) | undefined;
  #settled = false;
  #init: ResponseInit = {};
  #sink: Sink = 'none';
  #declared: number | undefined;
  #decoder: zlib.Gunzip | zlib.BrotliDecompress | zlib.Inflate | undefined;
  #lent: LentBody | undefined;
  #at = 0;
  #parts: Buffer[] = [];

  constructor(
    maxBodyBytes: number,
    pages: PageFetchOptions,
    signal: AbortSignal | undefined,
    resolve: (r: Response) => void,
    reject: (e: unknown) => void,
  ) {
    this.#cap = maxBodyBytes;
    this.#pages = pages;
    this.#signal = signal;
    this.#resolve = resolve;
    this.#reject = reject;
    signal?.addEventListener('abort', this.#onAbort, { once: true });
  }

  onConnect(abort: (reason?: Error) => void): void {
    this.#abort = abort;
    if (this.#settled) abort(abortError());
  }

  onHeaders(status: number, raw: Array<Buffer | string | Array<Buffer | string>>, _resume: () => void): boolean {
    if (this.#settled) return true;
    try {
      const pairs: Array<[string, string]> = [];
      let encoding: string | undefined;
      let length: string | undefined;
      for (let i = 0; i + 1 < raw.length; i += 2) {
        const name = latin1(raw[i] as Buffer | string).toLowerCase();
        const values = raw[i + 1]!;
        for (const v of Array.isArray(values) ? values : [values]) {
          const value = latin1(v);
          if (name === 'content-encoding') encoding = encoding === undefined ? value : `${encoding},${value}`;
          else if (name === 'content-length') length = value;
          pairs.push([name, value]);
        }
      }
      const coding = contentCoding(encoding);
      const headers = new Headers();
      for (const [name, value] of pairs) {
        // A decoded body has neither its coding nor its wire length any more.
        if (coding !== 'identity' && (name === 'content-encoding' || name === 'content-length')) continue;
        headers.append(name, value);
      }
      this.#init = { status, headers };
      if (NULL_BODY_STATUSES.has(status)) return true;
      this.#declared = coding === 'identity' ? declaredLength(length) : undefined;
      if (status < 200 || status >= 300 || this.#pages.lend === undefined) {
        this.#sink = 'plain';
      } else {
        this.#sink = 'lent';
        if (this.#declared !== undefined && this.#declared > this.#cap) {
          this.#overCap(this.#declared, true);
          return true;
        }
        if (this.#declared !== undefined) this.#lent = this.#pages.lend(this.#declared);
      }
      if (coding !== 'identity') this.#decodeWith(coding);
    } catch (e) {
      this.#fail(e);
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.#settled) return true;
    // The decoder reads its input later: it gets a copy, as the chunk's buffer is reused.
    if (this.#decoder !== undefined) this.#decoder.write(Buffer.from(chunk));
    else this.#take(chunk);
    return true;
  }

  onComplete(): void {
    if (this.#settled) return;
    if (this.#decoder !== undefined) this.#decoder.end();
    else this.#finish();
  }

  onError(err: Error): void {
    this.#fail(err);
  }

  #decodeWith(coding: Exclude<Coding, 'identity'>): void {
    const decoder = coding === 'gzip' ? zlib.createGunzip() : coding === 'br' ? zlib.createBrotliDecompress() : zlib.createInflate();
    decoder.on('data', (chunk: Buffer) => this.#take(chunk));
    decoder.on('end', () => this.#finish());
    decoder.on('error', (e) => this.#fail(e));
    this.#decoder = decoder;
  }

  #take(chunk: Buffer): void {
    if (this.#settled || this.#sink === 'none') return;
    const end = this.#at + chunk.length;
    if (this.#sink === 'plain') {
      if (end > this.#cap) return this.#fail(new AnswerProblem(`the answer passed ${this.#cap} bytes, more than it can weigh`));
      this.#parts.push(Buffer.from(chunk));
      this.#at = end;
      return;
    }
    if (end > this.#cap) return this.#overCap(end, false);
    const declared = this.#declared;
    if (declared !== undefined) {
      if (end > declared) return this.#fail(new AnswerProblem(`the body passed its declared length of ${declared} bytes`));
    } else if (this.#lent === undefined || end > this.#lent.bytes.length) {
      const size = Math.min(this.#cap, Math.max(end, 2 * (this.#lent?.bytes.length ?? 0), GROWING_START_BYTES));
      const next = this.#pages.lend!(size);
      if (this.#lent !== undefined) {
        this.#lent.bytes.copy(next.bytes, 0, 0, this.#at);
        this.#lent.done();
      }
      this.#lent = next;
    }
    this.#lent!.bytes.set(chunk, this.#at);
    this.#at = end;
  }

  #finish(): void {
    if (this.#settled) return;
    const response = new BufferedResponse(this.#sink === 'plain' ? this.#plainBytes() : null, this.#init);
    if (this.#sink === 'lent') {
      const at = this.#at;
      if (this.#declared !== undefined && at !== this.#declared) {
        return this.#fail(new AnswerProblem(`the body ended after ${at} of its declared ${this.#declared} bytes`));
      }
      let lent = this.#lent ?? this.#pages.lend!(0);
      if (lent.bytes.length !== at) {
        // A buffer of exactly the body's length, as the caller's pages expect.
        const exact = this.#pages.lend!(at);
        lent.bytes.copy(exact.bytes, 0, 0, at);
        lent.done();
        lent = exact;
      }
      this.#lent = undefined;
      attachLentAnswer(response, { kind: 'body', body: lent });
    }
    this.#settle();
    this.#resolve(response as unknown as Response);
  }

  #plainBytes(): Buffer {
    const parts = this.#parts;
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts, this.#at);
  }

  /** A page over the bound: answered as such, not read further, and not asked for again. */
  #overCap(bytes: number, declared: boolean): void {
    this.#settle();
    const response = new BufferedResponse(null, this.#init);
    attachLentAnswer(response, { kind: 'over-cap', bytes, declared });
    this.#resolve(response as unknown as Response);
    this.#abort?.(new AnswerProblem('the answer passed its bound'));
  }

  #fail(e: unknown): void {
    if (this.#settled) return;
    this.#settle();
    const aborted = this.#signal?.aborted === true;
    this.#reject(aborted ? abortError() : fetchFailed(stalled(e, this.#pages.stallTimeoutMs)));
    this.#abort?.(e instanceof Error ? e : new AnswerProblem(String(e)));
  }

  #settle(): void {
    this.#settled = true;
    this.#signal?.removeEventListener('abort', this.#onAbort);
    this.#lent?.done();
    this.#lent = undefined;
    this.#parts = [];
    this.#decoder?.destroy();
  }
}

function latin1(value: Buffer | string): string {
  return typeof value === 'string' ? value : value.toString('latin1');
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

/** What was wrong with an answer: the cause of the `TypeError` the SDK gets. */
class AnswerProblem extends Error {
  override name = 'AnswerProblem';
}

/** The error the runtime's `fetch` rejects with when its signal aborts. */
export function abortError(): Error {
  return new DOMException('This operation was aborted', 'AbortError');
}

/** The error the runtime's `fetch` rejects with when no usable answer came, `cause` saying why. */
export function fetchFailed(cause: unknown): TypeError {
  return new TypeError('fetch failed', { cause });
}
