import { unescapeJsonInPlace } from './json-unescape.js';
import { InternalError } from '../../errors.js';

/**
 * The bytes of listing pages whose contents stay bytes until they are written, and the contents
 * cut from them.
 *
 * Why: a content parsed into a JavaScript string lives in the heap while it waits for its turn to
 * be written; under a steady download it outlives two young collections and is promoted, so the
 * old generation fills with contents already written and the process grows by what went through
 * it, not by what it holds. A content kept as a range of its page's bytes costs the heap nothing:
 * it is decoded (when it has escapes, in place, see json-unescape.ts) only at the moment it is
 * written.
 *
 * Rules:
 * - a page's buffer comes from a process-wide pool and goes back to it once every content cut from
 *   it was read or dropped, and the page itself was handed on ({@link PageBytes.done});
 * - a content is read at most once: {@link PageContent.withBytes} gives its bytes to a callback that
 *   must not keep them past its return (they may be the page's own), then releases its hold;
 * - a buffer reused for another page has a new generation: a content of the old page that is read
 *   anyway throws instead of giving another page's bytes;
 * - a content never read nor dropped only keeps its page out of the pool: the buffer is collected
 *   as any other, so a lost hold costs reuse, never memory or correctness.
 */

/** Bytes of free page buffers the pool keeps for reuse; beyond, a returned buffer is left to the collector. */
export const PAGE_POOL_KEEP_BYTES = 8 * 1024 * 1024;

/** Smallest buffer the pool hands out: small pages share a size class. */
const MIN_BUFFER_BYTES = 64 * 1024;

const BACKSLASH = 0x5c;

interface PooledBuffer {
  buf: Buffer;
  generation: number;
}

const free = new Map<number, PooledBuffer[]>();
let freeBytes = 0;
let outstanding = 0;
let outstandingPeak = 0;

function sizeClass(n: number): number {
  let c = MIN_BUFFER_BYTES;
  while (c < n) c *= 2;
  return c;
}

/** What the pool holds (instrumentation): buffers lent out and not given back, their peak, and free ones. */
export function pagePoolStats(): { outstandingBytes: number; outstandingPeakBytes: number; freeBytes: number } {
  return { outstandingBytes: outstanding, outstandingPeakBytes: outstandingPeak, freeBytes };
}

/** Forget the peak (instrumentation, between measured runs). */
export function resetPagePoolPeak(): void {
  outstandingPeak = outstanding;
}

/** One page's bytes, lent by the pool until the page and every content cut from it are done. */
export class PageBytes {
  readonly #pooled: PooledBuffer;
  readonly #generation: number;
  readonly length: number;
  /** Holds on the buffer: the page's own (until {@link done}) and one per content not read yet. */
  #holds = 1;

  private constructor(pooled: PooledBuffer, length: number) {
    this.#pooled = pooled;
    this.#generation = pooled.generation;
    this.length = length;
  }

  /** A buffer of at least `length` bytes from the pool (or a new one), to be filled by the caller. */
  static lend(length: number): PageBytes {
    const cls = sizeClass(length);
    const list = free.get(cls);
    let pooled = list?.pop();
    if (pooled !== undefined) {
      freeBytes -= cls;
      pooled.generation++;
    } else {
      pooled = { buf: Buffer.allocUnsafeSlow(cls), generation: 0 };
    }
    outstanding += cls;
    if (outstanding > outstandingPeak) outstandingPeak = outstanding;
    return new PageBytes(pooled, length);
  }

  /** The page's bytes; valid until the last hold is released. */
  get bytes(): Buffer {
    this.#check();
    return this.#pooled.buf.subarray(0, this.length);
  }

  /**
   * A content of this page: the JSON string token at `[start, end)` (quotes included). It holds the
   * page's buffer until read or dropped.
   */
  content(start: number, end: number): PageContent {
    this.#check();
    this.#holds++;
    // Searched within the token only: a page of many contents is scanned once, not once per content.
    const escaped = this.#pooled.buf.subarray(start + 1, end - 1).indexOf(BACKSLASH) >= 0;
    return new PageContent(this, start, end, escaped);
  }

  /** The page was handed on: only its contents still hold the buffer. */
  done(): void {
    this.release();
  }

  /** @internal One hold ends; the last gives the buffer back to the pool. */
  release(): void {
    if (this.#holds <= 0) throw new InternalError('page buffer released more often than it was held');
    this.#holds--;
    if (this.#holds > 0) return;
    const cls = this.#pooled.buf.length;
    outstanding -= cls;
    // Never reused while this page's generation is current: the next lend bumps it.
    if (freeBytes + cls > PAGE_POOL_KEEP_BYTES) return;
    let list = free.get(cls);
    if (list === undefined) free.set(cls, (list = []));
    list.push(this.#pooled);
    freeBytes += cls;
  }

  #check(): void {
    if (this.#pooled.generation !== this.#generation || this.#holds <= 0) {
      throw new InternalError('a page buffer was read after it was given back to the pool');
    }
  }
}

/** A memory's content as its listing page carried it: a JSON string token in the page's bytes. */
export class PageContent {
  readonly #page: PageBytes;
  /** Where the content's bytes start in the page (just past the token's opening quote). */
  readonly #start: number;
  /** Their length: the token's inside, then what it decodes to once decoded (in place). */
  #length: number;
  #escaped: boolean;
  /** The token's inside length, fixed: what the content weighs in a budget (a bound of its size). */
  readonly rawBytes: number;
  #spent = false;

  constructor(page: PageBytes, start: number, end: number, escaped: boolean) {
    this.#page = page;
    this.#start = start + 1;
    this.#length = end - start - 2;
    this.rawBytes = this.#length;
    this.#escaped = escaped;
  }

  /**
   * Call `use` with the content's UTF-8 bytes (the page's own, decoded in place when the token has
   * escapes), then release the page: `use` must not keep them past its return. Throws a
   * `SyntaxError` for a token that is not a JSON string, and when read twice.
   */
  withBytes<T>(use: (bytes: Buffer) => T): T {
    if (this.#spent) throw new InternalError('a listed content was read twice');
    this.#spent = true;
    try {
      const bytes = this.#decoded();
      return use(bytes.subarray(this.#start, this.#start + this.#length));
    } finally {
      this.#page.release();
    }
  }

  /** The content as a string, read as {@link withBytes} reads it. */
  text(): string {
    return this.withBytes((bytes) => bytes.toString('utf8'));
  }

  /** The content's size in bytes (decodes an escaped token in place to measure it; the page stays held). */
  byteLength(): number {
    if (this.#spent) throw new InternalError('a listed content was measured after it was read');
    this.#decoded();
    return this.#length;
  }

  /** Release the page without reading the content (a memory skipped). Does nothing once read. */
  drop(): void {
    if (this.#spent) return;
    this.#spent = true;
    this.#page.release();
  }

  #decoded(): Buffer {
    const bytes = this.#page.bytes;
    if (this.#escaped) {
      this.#length = unescapeJsonInPlace(bytes, this.#start, this.#start + this.#length);
      this.#escaped = false;
    }
    return bytes;
  }
}
