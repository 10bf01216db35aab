/**
 * What the page transport answers with: a `Response` over bytes already read (the SDK reads it as
 * it reads any answer), and the body a page answer read into a lent buffer, which the caller takes
 * from the response once ({@link takeLentBody}) and gives back.
 */

/** A buffer lent for a body: `bytes` is exactly the body's length; `done` gives it back. */
export interface LentBody {
  readonly bytes: Buffer;
  done(): void;
}

/** A successful answer's body: read into a lent buffer, or not read because it passed the bound. */
export type LentAnswer = { kind: 'body'; body: LentBody } | { kind: 'over-cap'; bytes: number; declared: boolean };

const LENT = Symbol('lentBody');

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

/** Put on `response` the lent body (or the over-bound verdict) that {@link takeLentBody} takes once. */
export function attachLentAnswer(response: BufferedResponse, answer: LentAnswer): void {
  (response as unknown as { [LENT]?: LentAnswer })[LENT] = answer;
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
export class BufferedResponse extends ResponseBase {
  readonly #bytes: Buffer | null;
  #used = false;

  constructor(bytes: Buffer | null, init: ResponseInit) {
    super(null, init);
    this.#bytes = bytes;
  }

  get bodyUsed(): boolean {
    return this.#used;
  }

  /**
   * Always null: nothing is built on bytes already read, as a stream per answer costs CPU on every
   * write. The SDK only looks at `body` (to hold it as a key, or to cancel it), and reads an answer
   * with `json()` or `text()`; a bounded reader takes the bytes with {@link takeBufferedBytes}.
   */
  get body(): null {
    return null;
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

  /** The whole body, once, when it was read into bytes of its own; the body is then used. */
  takeBytes(): Buffer | undefined {
    if (this.#used || this.#bytes === null) return undefined;
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
