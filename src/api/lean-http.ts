import * as net from 'node:net';
import * as tls from 'node:tls';

/**
 * A lean HTTP/1.1 client for the worker's small JSON requests and its listing pages, on sockets
 * that read into one reused buffer per connection.
 *
 * Why: Node's `http` client hands every socket read to JavaScript as a new 64 KiB buffer. A mount
 * downloading hundreds of MiB of contents makes as many such buffers, each freed only at the next
 * young collection, so the process holds tens of MiB of read buffers already copied out, and the
 * allocator keeps that high water; and each request builds a `ClientRequest`, an
 * `IncomingMessage` and their streams, which is most of what a small request costs the main
 * thread. Here a connection is opened with `onread`: the kernel's bytes land in the connection's
 * own buffer, the head is parsed from it and the body is copied straight into the buffer the
 * caller lends (a listing page) or into one buffer of its own (any other answer).
 *
 * Rules:
 * - one request at a time per connection, its body (if any) sent with its length; a connection is
 *   kept for the next request only when the answer was HTTP/1.1, framed by its length or by chunks,
 *   read to its exact end, and not marked `connection: close`; a kept connection unused for
 *   {@link IDLE_MS} (or a second less than the server's `keep-alive: timeout=N`, when shorter) is
 *   not used again (the server's own timeout would race the request) but closed when next looked
 *   at, with no timer per request;
 * - a head over {@link MAX_HEAD_BYTES}, a malformed status line or header, a `content-length` with
 *   `transfer-encoding`, two different lengths, a bad chunk size, an upgrade, or bytes after the
 *   end: a malformed answer, the request fails and the connection is dropped;
 * - a body is bounded by `capBytes`: a lent one declared over it is not read at all, and one passing
 *   it while read is given up (reported as over the bound); any other body passing it fails the
 *   request; a lent body that gets no byte for `stallTimeoutMs` is given up;
 * - a GET or HEAD on a kept connection that the server closed meanwhile (no byte of answer came) is
 *   sent once more on a new connection: it changes nothing. Any other method is not: it fails, as
 *   it would with Node's own client, and the caller's retry policy decides;
 * - kept connections never keep the process alive, are dropped when the server closes them, and
 *   at most {@link MAX_IDLE_PER_ORIGIN} are kept per origin.
 */

/** Bytes of an answer's status line and headers at most (as Node's own `http` default). */
export const MAX_HEAD_BYTES = 16 * 1024;
/** Bytes a connection reads into at once; allocated once per connection. */
const READ_BUFFER_BYTES = 64 * 1024;
/** Kept connections per origin at most. */
export const MAX_IDLE_PER_ORIGIN = 16;
/** Milliseconds a kept connection may wait for its next request; one that waited longer is closed instead. */
export const IDLE_MS = 4_000;
/** Milliseconds of quiet before the kernel probes a connection (TCP keep-alive). */
const KEEPALIVE_PROBE_MS = 1_000;
/** Bytes of a chunk-size line (with its extensions) or of a trailer line at most. */
const MAX_LINE_BYTES = 1024;
/** Bytes of trailers after a chunked body at most. */
const MAX_TRAILER_BYTES = MAX_HEAD_BYTES;

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/u;
const BAD_VALUE = /[\0\r\n]/u;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([^\r\n]*))?$/u;
const LF = 0x0a;

/** A buffer lent for a body: `bytes` is exactly the body's length; `done` gives it back. */
export interface LentBody {
  readonly bytes: Buffer;
  done(): void;
}

/** How a successful answer's body is read into a buffer the caller lends. */
export interface PageFetchOptions {
  /** A buffer of exactly `length` bytes. */
  lend(length: number): LentBody;
  /** A body that gets no data for this long is given up (the request fails as a lost connection). */
  stallTimeoutMs: number;
}

/** A successful answer's body: read into a lent buffer, or not read because it passed the bound. */
export type LentAnswer = { kind: 'body'; body: LentBody } | { kind: 'over-cap'; bytes: number; declared: boolean };

/** An answer: its head, and its body (lent for a 2xx when the request lends, else plain bytes). */
export interface LeanAnswer {
  status: number;
  statusText: string;
  rawHeaders: string[];
  body: { kind: 'lent'; answer: LentAnswer } | { kind: 'bytes'; bytes: Buffer };
}

export interface LeanRequest {
  method: string;
  url: URL;
  headers: Record<string, string>;
  /** Sent with its length; none for a GET or HEAD. */
  body?: Uint8Array | undefined;
  signal: AbortSignal | undefined;
  /** Bytes of the answer's body at most. */
  capBytes: number;
  /** Set: a 2xx body is read into a buffer it lends (a listing page). */
  pages?: PageFetchOptions | undefined;
}

/** Why a request failed without an answer; `cause` is the socket's own error when it had one, `aborted` if the caller aborted. */
export class LeanRequestError extends Error {
  readonly aborted: boolean;
  constructor(message: string, aborted = false, options?: { cause: unknown }) {
    super(message, options);
    this.name = 'LeanRequestError';
    this.aborted = aborted;
  }
}

/** What the transport did (instrumentation): connections opened and the requests they carried. */
export function leanHttpStats(): { connections: number; requests: number; idle: number } {
  let idle = 0;
  for (const list of pool.values()) idle += list.length;
  return { connections: opened, requests: sent, idle };
}

let opened = 0;
let sent = 0;
const pool = new Map<string, Connection[]>();

/** Send `req` and read its answer; rejects with a {@link LeanRequestError} when no answer came. */
export async function leanRequest(req: LeanRequest): Promise<LeanAnswer> {
  if (req.url.protocol !== 'http:' && req.url.protocol !== 'https:') throw new LeanRequestError(`unsupported scheme ${req.url.protocol}`);
  const head = requestHead(req);
  const origin = `${req.url.protocol}//${req.url.host}`;
  const kept = takeIdle(origin);
  if (kept !== undefined) {
    try {
      return await kept.exchange(head, req);
    } catch (e) {
      // The server closed the kept connection as the request went out: once more, on a new one.
      if (!(e instanceof StaleConnection)) throw e;
    }
  }
  return new Connection(origin, req.url).exchange(head, req);
}

/** Thrown inside only: a kept connection ended before any byte of the answer. */
class StaleConnection extends Error {}

/** The most recently kept connection of `origin` that has not waited past {@link IDLE_MS}; older ones are closed. */
function takeIdle(origin: string): Connection | undefined {
  const list = pool.get(origin);
  if (list === undefined) return undefined;
  const now = Date.now();
  let conn: Connection | undefined;
  while (conn === undefined && list.length > 0) {
    const next = list.pop()!;
    if (now <= next.idleUntil) conn = next;
    else next.close();
  }
  if (list.length === 0) pool.delete(origin);
  return conn;
}

const idempotent = (method: string): boolean => method === 'GET' || method === 'HEAD';

function requestHead(req: LeanRequest): Buffer {
  const { method, url } = req;
  if (!TOKEN.test(method)) throw new LeanRequestError(`invalid method ${JSON.stringify(method)}`);
  let head = `${method} ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\nconnection: keep-alive\r\n`;
  for (const [name, value] of Object.entries(req.headers)) {
    const lower = name.toLowerCase();
    if (lower === 'host' || lower === 'connection' || lower === 'content-length' || lower === 'transfer-encoding') continue;
    if (!TOKEN.test(name) || BAD_VALUE.test(value)) throw new LeanRequestError(`invalid header ${JSON.stringify(name)}`);
    head += `${name}: ${value}\r\n`;
  }
  if (req.body !== undefined || (method !== 'GET' && method !== 'HEAD')) head += `content-length: ${req.body?.length ?? 0}\r\n`;
  return Buffer.from(`${head}\r\n`, 'latin1');
}

type Framing = { kind: 'length'; left: number } | { kind: 'chunked' } | { kind: 'close' } | { kind: 'none' };

/** Where body bytes go: a lent buffer filled in place (declared length), a growing lent one, or plain chunks. */
interface Sink {
  write(src: Buffer, from: number, to: number): boolean;
  readonly size: number;
}

class Connection {
  readonly #origin: string;
  readonly #socket: net.Socket;
  readonly #buffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  /** The exchange reading now; bytes with none reading are a broken protocol. */
  #current: Exchange | undefined;
  #connected = false;
  #dead = false;
  /** Until when a kept connection may carry the next request (ms since the epoch). */
  idleUntil = 0;

  constructor(origin: string, url: URL) {
    this.#origin = origin;
    opened++;
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    const onread = { buffer: this.#buffer, callback: (n: number, buf: Buffer): boolean => this.#onRead(n, buf) };
    this.#socket =
      url.protocol === 'https:'
        ? // `onread` works for TLS sockets too (Node 14.17+), though the types name it for net only.
          tls.connect({
            host,
            port,
            ...(net.isIP(host) === 0 ? { servername: host } : {}),
            ALPNProtocols: ['http/1.1'],
            onread,
          } as tls.ConnectionOptions)
        : net.connect({ host, port, onread });
    this.#socket.setNoDelay(true);
    // As Node's keep-alive agent does: the kernel probes a quiet connection, so a dead peer shows.
    this.#socket.setKeepAlive(true, KEEPALIVE_PROBE_MS);
    this.#socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => (this.#connected = true));
    this.#socket.on('error', (e) => this.#end(e));
    this.#socket.on('end', () => this.#end(undefined));
    this.#socket.on('close', () => this.#end(undefined));
  }

  exchange(head: Buffer, req: LeanRequest): Promise<LeanAnswer> {
    if (req.signal?.aborted === true) return Promise.reject(new LeanRequestError('aborted', true));
    return new Promise((resolve, reject) => {
      const reused = this.#connected;
      this.#current = new Exchange(req, {
        resolve: (a) => {
          this.#current = undefined;
          resolve(a);
        },
        reject: (e) => {
          this.#current = undefined;
          this.#kill();
          reject(e);
        },
        stale: () => (reused && idempotent(req.method) ? new StaleConnection('kept connection closed') : undefined),
        release: (idleMs) => this.#release(idleMs),
        kill: () => this.#kill(),
      });
      this.#socket.ref();
      sent++;
      // One write: a small request goes out in one segment, with no vectored write to build.
      const body = req.body;
      this.#socket.write(body === undefined || body.length === 0 ? head : Buffer.concat([head, body], head.length + body.length));
    });
  }

  #onRead(n: number, buf: Buffer): boolean {
    const ex = this.#current;
    if (ex === undefined) {
      // Bytes nobody asked for: the connection cannot be trusted with the next answer.
      this.#kill();
      return false;
    }
    ex.feed(buf, n);
    return true;
  }

  #end(error: Error | undefined): void {
    const ex = this.#current;
    this.#dead = true;
    this.#drop();
    if (ex !== undefined) ex.closed(error);
    else this.#socket.destroy();
  }

  /** The answer was read to its exact end on a connection that may wait `idleMs` for the next one. */
  #release(idleMs: number): void {
    if (this.#dead) return;
    const list = pool.get(this.#origin) ?? [];
    if (list.length >= MAX_IDLE_PER_ORIGIN) {
      this.#kill();
      return;
    }
    list.push(this);
    pool.set(this.#origin, list);
    this.#socket.unref();
    // No timer: a connection kept past its bound is closed when next looked at (the server may close it first).
    this.idleUntil = Date.now() + idleMs;
  }

  #drop(): void {
    const list = pool.get(this.#origin);
    const at = list?.indexOf(this) ?? -1;
    if (list !== undefined && at >= 0) {
      list.splice(at, 1);
      if (list.length === 0) pool.delete(this.#origin);
    }
  }

  /** Close a kept connection that waited too long. */
  close(): void {
    this.#kill();
  }

  #kill(): void {
    this.#dead = true;
    this.#drop();
    this.#socket.destroy();
  }
}

interface ExchangeEnd {
  resolve(answer: LeanAnswer): void;
  reject(error: Error): void;
  /** The error to retry with when the connection ends before any byte (a kept one only). */
  stale(): Error | undefined;
  /** Keep the connection for another request, for at most `idleMs`. */
  release(idleMs: number): void;
  kill(): void;
}

/** One request's answer being read: head, then body by its framing. */
class Exchange {
  readonly #req: LeanRequest;
  readonly #end: ExchangeEnd;
  #finished = false;
  #received = 0;
  /** The head's bytes so far, when it came cut across reads. */
  #head: Buffer | undefined;
  #headBytes = 0;
  #status = 0;
  #statusText = '';
  #rawHeaders: string[] = [];
  #keepAlive = false;
  /** How long the connection may wait for the next request: {@link IDLE_MS}, or less when the server says so. */
  #idleMs = IDLE_MS;
  #framing: Framing = { kind: 'none' };
  #sink: Sink | undefined;
  #lent: LentBody | undefined;
  #chunks: Buffer[] = [];
  // Chunked framing: the state, the line being read, and what is left of the chunk.
  #chunk: 'size' | 'data' | 'data-end' | 'trailer' = 'size';
  #line = '';
  #chunkLeft = 0;
  #trailerBytes = 0;
  #stall: NodeJS.Timeout | undefined;
  /** When the body last got bytes (ms since the epoch). */
  #lastData = 0;
  readonly #onAbort: () => void;

  constructor(req: LeanRequest, end: ExchangeEnd) {
    this.#req = req;
    this.#end = end;
    this.#onAbort = () => this.#fail(new LeanRequestError('aborted', true));
    req.signal?.addEventListener('abort', this.#onAbort, { once: true });
  }

  feed(buf: Buffer, n: number): void {
    if (this.#finished) return;
    this.#received += n;
    let at = 0;
    if (this.#status === 0) {
      at = this.#readHead(buf, n);
      if (at < 0 || this.#finished) return;
    }
    this.#armStall();
    this.#readBody(buf, at, n);
  }

  /** The connection ended (or failed) with this answer unread or partly read. */
  closed(error: Error | undefined): void {
    if (this.#finished) return;
    if (this.#received === 0) {
      const stale = this.#end.stale();
      if (stale !== undefined) {
        this.#settle();
        this.#end.reject(stale);
        return;
      }
    }
    if (this.#status !== 0 && this.#framing.kind === 'close' && error === undefined) {
      this.#complete(false);
      return;
    }
    this.#fail(
      error !== undefined
        ? new LeanRequestError(error.message, false, { cause: error })
        : new LeanRequestError('the connection closed before the answer was complete'),
    );
  }

  /** Bytes of the head from `buf[0..n)`; returns where the body starts, or -1 while the head is not whole. */
  #readHead(buf: Buffer, n: number): number {
    let from = 0;
    for (;;) {
      // Most heads come whole in one read: parsed in place. A head cut across reads is kept, up to its bound.
      let text: string;
      let bodyAt: number;
      if (this.#headBytes === 0) {
        const endAt = buf.indexOf('\r\n\r\n', from, 'latin1');
        if (endAt < 0 || endAt >= n) {
          this.#keepHead(buf, from, n);
          return -1;
        }
        if (endAt + 4 - from > MAX_HEAD_BYTES) return this.#headTooLarge();
        text = buf.toString('latin1', from, endAt);
        bodyAt = endAt + 4;
      } else {
        const before = this.#headBytes;
        this.#keepHead(buf, from, n);
        if (this.#finished) return -1;
        const all = this.#head!;
        const endAt = all.indexOf('\r\n\r\n', Math.max(0, before - 3), 'latin1');
        if (endAt < 0) return -1;
        if (endAt + 4 > MAX_HEAD_BYTES) return this.#headTooLarge();
        text = all.toString('latin1', 0, endAt);
        bodyAt = from + (endAt + 4 - before);
        this.#head = undefined;
        this.#headBytes = 0;
      }
      if (!this.#parseHead(text)) return -1;
      if (this.#status >= 100 && this.#status < 200) {
        // An interim answer: the real one follows.
        this.#status = 0;
        this.#rawHeaders = [];
        from = bodyAt;
        if (from >= n) return -1;
        continue;
      }
      this.#startBody();
      return this.#finished ? -1 : bodyAt;
    }
  }

  /** Keep `buf[from..n)` as the start of a head; past {@link MAX_HEAD_BYTES} the answer is refused. */
  #keepHead(buf: Buffer, from: number, n: number): void {
    const take = Math.min(n - from, MAX_HEAD_BYTES + 4 - this.#headBytes);
    const piece = Buffer.from(buf.subarray(from, from + take));
    this.#head = this.#head === undefined ? piece : Buffer.concat([this.#head, piece]);
    this.#headBytes += take;
    if (this.#headBytes > MAX_HEAD_BYTES && this.#head.indexOf('\r\n\r\n', 0, 'latin1') < 0) this.#headTooLarge();
  }

  #headTooLarge(): -1 {
    this.#fail(new LeanRequestError(`the answer's head passed ${MAX_HEAD_BYTES} bytes`));
    return -1;
  }

  #parseHead(text: string): boolean {
    const lines = text.split('\r\n');
    const status = STATUS_LINE.exec(lines[0]!);
    if (status === null) return this.#malformed('its status line is not HTTP/1.x');
    let length: number | undefined;
    let chunked = false;
    let close = status[1] === '0';
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(':');
      const name = colon > 0 ? line.slice(0, colon) : '';
      if (!TOKEN.test(name)) return this.#malformed('a header line is malformed');
      const value = line.slice(colon + 1).trim();
      if (BAD_VALUE.test(value)) return this.#malformed('a header value is malformed');
      this.#rawHeaders.push(name, value);
      const lower = name.toLowerCase();
      if (lower === 'content-length') {
        if (!/^\d{1,15}$/u.test(value)) return this.#malformed('its content-length is not a number');
        const v = Number(value);
        if (length !== undefined && length !== v) return this.#malformed('it declares two lengths');
        length = v;
      } else if (lower === 'transfer-encoding') {
        const codings = value
          .toLowerCase()
          .split(',')
          .map((c) => c.trim());
        if (codings.at(-1) !== 'chunked' || codings.length > 1) return this.#malformed(`its transfer-encoding ${value} is not chunked`);
        chunked = true;
      } else if (lower === 'connection' && /(^|,)\s*close\s*(,|$)/iu.test(value)) {
        close = true;
      } else if (lower === 'keep-alive') {
        // `timeout=N`: the server closes an idle connection after N s; a second is kept in hand.
        const hint = /(?:^|,)\s*timeout=(\d{1,9})\s*(?:,|$)/iu.exec(value);
        if (hint !== null) this.#idleMs = Math.min(IDLE_MS, Number(hint[1]) * 1000 - 1000);
      }
    }
    const code = Number(status[2]);
    if (code === 101) return this.#malformed('it switches protocols');
    this.#status = code;
    this.#statusText = status[3] ?? '';
    if (code < 200) return true;
    if (chunked && length !== undefined) return this.#malformed('it declares both a length and chunks');
    this.#keepAlive = !close && this.#idleMs > 0;
    if (code === 204 || code === 304 || this.#req.method === 'HEAD') this.#framing = { kind: 'none' };
    else if (chunked) this.#framing = { kind: 'chunked' };
    else if (length !== undefined) this.#framing = length === 0 ? { kind: 'none' } : { kind: 'length', left: length };
    else {
      this.#framing = { kind: 'close' };
      this.#keepAlive = false;
    }
    return true;
  }

  /** A 2xx answer to a request that lends: its body goes into lent buffers. */
  get #lends(): boolean {
    return this.#req.pages !== undefined && this.#status >= 200 && this.#status < 300;
  }

  #startBody(): void {
    const cap = this.#req.capBytes;
    const f = this.#framing;
    if (f.kind === 'length' && f.left > cap) {
      if (this.#lends) this.#overCap(f.left, true);
      else this.#fail(new LeanRequestError(`the answer passed ${cap} bytes; not read further`));
      return;
    }
    if (this.#lends) this.#sink = f.kind === 'length' ? this.#fixedSink(f.left) : this.#growingSink();
    else this.#sink = this.#plainSink(f.kind === 'length' ? f.left : undefined);
  }

  #readBody(buf: Buffer, at: number, n: number): void {
    const f = this.#framing;
    if (f.kind === 'length') {
      const take = Math.min(f.left, n - at);
      if (!this.#put(buf, at, at + take)) return;
      f.left -= take;
      if (f.left === 0) {
        if (at + take < n) this.#malformed('bytes came after its end');
        else this.#complete(true);
      }
      return;
    }
    if (f.kind === 'close') {
      this.#put(buf, at, n);
      return;
    }
    if (f.kind === 'chunked') this.#readChunks(buf, at, n);
    else if (at < n) this.#malformed('bytes came after its end');
    else this.#complete(true);
  }

  #readChunks(buf: Buffer, at: number, n: number): void {
    while (at < n && !this.#finished) {
      if (this.#chunk === 'data') {
        const take = Math.min(this.#chunkLeft, n - at);
        if (!this.#put(buf, at, at + take)) return;
        this.#chunkLeft -= take;
        at += take;
        if (this.#chunkLeft === 0) this.#chunk = 'data-end';
        continue;
      }
      const lf = buf.indexOf(LF, at);
      const to = lf < 0 || lf >= n ? n : lf;
      this.#line += buf.toString('latin1', at, to);
      if (this.#chunk === 'trailer') this.#trailerBytes += to - at + 1;
      at = to;
      if (this.#line.length > MAX_LINE_BYTES || this.#trailerBytes > MAX_TRAILER_BYTES) {
        this.#malformed('a chunk line is too long');
        return;
      }
      if (at === n) return;
      at++; // the LF
      if (!this.#line.endsWith('\r')) {
        this.#malformed('a chunk line does not end in CRLF');
        return;
      }
      const line = this.#line.slice(0, -1);
      this.#line = '';
      if (this.#chunk === 'data-end') {
        if (line !== '') {
          this.#malformed('a chunk is longer than its size');
          return;
        }
        this.#chunk = 'size';
      } else if (this.#chunk === 'size') {
        const m = /^([0-9a-fA-F]{1,12})(?:[ \t]*;.*)?$/u.exec(line);
        if (m === null) {
          this.#malformed('a chunk size is malformed');
          return;
        }
        const size = Number.parseInt(m[1]!, 16);
        if (size === 0) this.#chunk = 'trailer';
        else {
          if (this.#sink !== undefined && this.#sink.size + size > this.#req.capBytes) {
            this.#passed(this.#sink.size + size);
            return;
          }
          this.#chunkLeft = size;
          this.#chunk = 'data';
        }
      } else if (line === '') {
        if (at < n) this.#malformed('bytes came after its end');
        else this.#complete(true);
        return;
      }
    }
  }

  /** Body bytes `[from, to)` of `src` into the sink; false once the read ended (the bound passed). */
  #put(src: Buffer, from: number, to: number): boolean {
    if (from === to) return true;
    const sink = this.#sink!;
    if (sink.size + (to - from) > this.#req.capBytes) {
      this.#passed(sink.size + (to - from));
      return false;
    }
    return sink.write(src, from, to);
  }

  #passed(bytes: number): void {
    if (this.#lends) this.#overCap(bytes, false);
    else this.#fail(new LeanRequestError(`the answer passed ${this.#req.capBytes} bytes; not read further`));
  }

  #fixedSink(length: number): Sink {
    const lent = this.#req.pages!.lend(length);
    this.#lent = lent;
    let size = 0;
    return {
      write: (src, from, to) => {
        src.copy(lent.bytes, size, from, to);
        size += to - from;
        return true;
      },
      get size() {
        return size;
      },
    };
  }

  /** No declared length: a lent buffer that doubles as it fills (the pool's buffers, so nothing is left to the collector). */
  #growingSink(): Sink {
    let size = 0;
    const sink: Sink = {
      write: (src, from, to) => {
        const need = size + (to - from);
        let lent = this.#lent;
        if (lent === undefined || need > lent.bytes.length) {
          const next = this.#req.pages!.lend(Math.min(this.#req.capBytes, Math.max(need, 2 * (lent?.bytes.length ?? 0), 64 * 1024)));
          if (lent !== undefined) {
            lent.bytes.copy(next.bytes, 0, 0, size);
            lent.done();
          }
          this.#lent = lent = next;
        }
        src.copy(lent.bytes, size, from, to);
        size = need;
        return true;
      },
      get size() {
        return size;
      },
    };
    return sink;
  }

  /** A body the caller does not lend for: one buffer of its declared length, else its pieces copied. */
  #plainSink(declared: number | undefined): Sink {
    let size = 0;
    const whole = declared !== undefined ? Buffer.allocUnsafe(declared) : undefined;
    if (whole !== undefined) this.#chunks = [whole];
    return {
      write: (src, from, to) => {
        if (whole !== undefined) src.copy(whole, size, from, to);
        else this.#chunks.push(Buffer.from(src.subarray(from, to)));
        size += to - from;
        return true;
      },
      get size() {
        return size;
      },
    };
  }

  /** The answer was read to its end; `reusable` when its framing left the connection fit for another. */
  #complete(reusable: boolean): void {
    const size = this.#sink?.size ?? 0;
    let answer: LeanAnswer['body'];
    if (this.#lends) {
      let lent = this.#lent;
      this.#lent = undefined;
      if (lent === undefined) lent = this.#req.pages!.lend(0);
      else if (lent.bytes.length !== size) {
        // A grown buffer: the body is handed on in one of its exact length.
        const exact = this.#req.pages!.lend(size);
        lent.bytes.copy(exact.bytes, 0, 0, size);
        lent.done();
        lent = exact;
      }
      answer = { kind: 'lent', answer: { kind: 'body', body: lent } };
    } else {
      answer = {
        kind: 'bytes',
        bytes: this.#chunks.length === 1 && this.#chunks[0]!.length === size ? this.#chunks[0]! : Buffer.concat(this.#chunks, size),
      };
      this.#chunks = [];
    }
    this.#settle();
    if (reusable && this.#keepAlive) this.#end.release(this.#idleMs);
    else this.#end.kill();
    this.#end.resolve({ status: this.#status, statusText: this.#statusText, rawHeaders: this.#rawHeaders, body: answer });
  }

  #overCap(bytes: number, declared: boolean): void {
    this.#settle();
    this.#end.kill();
    this.#end.resolve({
      status: this.#status,
      statusText: this.#statusText,
      rawHeaders: this.#rawHeaders,
      body: { kind: 'lent', answer: { kind: 'over-cap', bytes, declared } },
    });
  }

  #malformed(why: string): false {
    this.#fail(new LeanRequestError(`malformed answer: ${why}`));
    return false;
  }

  #fail(error: LeanRequestError): void {
    if (this.#finished) return;
    this.#settle();
    this.#end.reject(error);
  }

  /** One timer per answer, moved on by the bytes that came since it was set (none set per read). */
  #armStall(): void {
    const stallMs = this.#req.pages?.stallTimeoutMs;
    if (stallMs === undefined) return;
    this.#lastData = Date.now();
    if (this.#stall !== undefined) return;
    const check = (): void => {
      const quiet = Date.now() - this.#lastData;
      if (quiet >= stallMs) this.#fail(new LeanRequestError(`the answer's body stalled for ${stallMs} ms; gave up`));
      else this.#stall = setTimeout(check, stallMs - quiet);
    };
    this.#stall = setTimeout(check, stallMs);
  }

  /** The read is over: timers and listeners gone, a buffer still lent given back. */
  #settle(): void {
    this.#finished = true;
    clearTimeout(this.#stall);
    this.#req.signal?.removeEventListener('abort', this.#onAbort);
    this.#lent?.done();
    this.#lent = undefined;
    this.#chunks = [];
  }
}
