import { RemoteApiError, RemoteLimitError } from '../../errors.js';
import { takeBufferedBytes } from '../../api/page-response.js';
import { PageBytes } from './page-bytes.js';

/**
 * Read a response body as UTF-8 text without ever holding more than `capBytes` of it: a declared
 * length over the cap is refused before reading, and the read stops (and the body is cancelled)
 * as soon as the cap is passed. The read also gives up after `timeoutMs` without data, so a
 * server that sends headers and then stalls costs a bounded wait.
 *
 * Throws a {@link RemoteLimitError} (`body-size`) for a body over the cap, and a retryable
 * {@link RemoteApiError} for a body that stalls; the caller adds what was read.
 */
export async function readBodyCapped(res: Response, opts: { capBytes: number; timeoutMs: number; signal?: AbortSignal }): Promise<string> {
  // An answer the page transport already read whole is decoded from its bytes, with no stream built.
  const whole = takeBufferedBytes(res);
  if (whole !== undefined) {
    if (opts.signal?.aborted) throw opts.signal.reason;
    if (whole.length > opts.capBytes) {
      throw new RemoteLimitError('body-size', `the answer has ${whole.length} bytes, over the ${opts.capBytes} bytes it can weigh`);
    }
    return new TextDecoder('utf-8', { ignoreBOM: true }).decode(whole);
  }
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  const parts: string[] = [];
  // Each chunk is decoded as it arrives and released: the body is never copied into one buffer of
  // its own, which would cost an allocation outside the JavaScript heap per page.
  await readChunks(res, opts, (value) => parts.push(decoder.decode(value, { stream: true })));
  parts.push(decoder.decode());
  return parts.join('');
}

/**
 * The same bounded read, into a page buffer lent by the pool (see page-bytes.ts): the bytes stay
 * valid until the page and the contents cut from it are done with them.
 */
export async function readBodyToPage(
  res: Response,
  opts: { capBytes: number; timeoutMs: number; signal?: AbortSignal },
): Promise<PageBytes> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  await readChunks(res, opts, (value) => {
    chunks.push(value);
    total += value.byteLength;
  });
  const page = PageBytes.lend(total);
  const into = page.bytes;
  let at = 0;
  for (const c of chunks) {
    into.set(c, at);
    at += c.byteLength;
  }
  return page;
}

async function readChunks(
  res: Response,
  opts: { capBytes: number; timeoutMs: number; signal?: AbortSignal },
  onChunk: (value: Uint8Array) => void,
): Promise<void> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > opts.capBytes) {
    await res.body?.cancel().catch(() => {});
    throw new RemoteLimitError(
      'body-size',
      `the answer declares ${declared} bytes, over the ${opts.capBytes} bytes it can weigh; not read`,
    );
  }
  if (res.body === null) return;
  const reader = res.body.getReader();
  let total = 0;
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const arm = (): void => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      timedOut = true;
      reader.cancel().catch(() => {});
    }, opts.timeoutMs);
  };
  const onAbort = (): void => void reader.cancel(opts.signal?.reason).catch(() => {});
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      arm();
      const { done, value } = await reader.read();
      if (opts.signal?.aborted) throw opts.signal.reason;
      if (timedOut) throw new RemoteApiError(`the answer's body stalled for ${opts.timeoutMs} ms; gave up`, { retryable: true });
      if (done) break;
      total += value.byteLength;
      if (total > opts.capBytes) {
        await reader.cancel().catch(() => {});
        throw new RemoteLimitError('body-size', `the answer passed ${opts.capBytes} bytes, more than it can weigh; stopped reading it`);
      }
      onChunk(value);
    }
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  }
}
