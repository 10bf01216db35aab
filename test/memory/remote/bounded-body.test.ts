/**
 * Pins readBodyCapped: a body is read whole when under the cap; a declared length over the cap is
 * refused without reading; a body that passes the cap is cut off there (a RemoteLimitError); a
 * body that stalls is given up after the timeout (a retryable RemoteApiError); an abort stops the read.
 * The text is the body's bytes decoded as UTF-8 whatever the chunking (a character split between
 * chunks is decoded whole, a byte-order mark kept, invalid bytes replaced).
 */
import { describe, expect, it } from 'vitest';
import { RemoteApiError, RemoteLimitError } from '../../../src/errors.js';
import { readBodyCapped } from '../../../src/memory/remote/bounded-body.js';

function streamed(
  chunks: Array<string | number[]>,
  opts: { stallAfter?: boolean; headers?: Record<string, string> } = {},
): { res: Response; pulled: () => number } {
  let pulled = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulled < chunks.length) {
        const chunk = chunks[pulled++]!;
        controller.enqueue(typeof chunk === 'string' ? new TextEncoder().encode(chunk) : Uint8Array.from(chunk));
        return;
      }
      if (!opts.stallAfter) controller.close();
      return new Promise(() => {});
    },
  });
  return { res: new Response(body, { headers: opts.headers ?? {} }), pulled: () => pulled };
}

describe('readBodyCapped', () => {
  const rows = [
    { description: 'a body under the cap is read whole', chunks: ['{"a":', '1}'], cap: 100, result: '{"a":1}' },
    { description: 'a body exactly at the cap is read whole', chunks: ['12345'], cap: 5, result: '12345' },
    { description: 'a body over the cap is refused', chunks: ['1234', '5678'], cap: 5, result: RemoteLimitError },
    {
      description: 'a character split across two chunks is decoded whole',
      chunks: [
        [0x22, 0xc3],
        [0xa9, 0x22],
      ],
      cap: 100,
      result: '"\u00e9"',
    },
    {
      description: 'a four-byte character split over three chunks is decoded whole',
      chunks: [[0xf0, 0x9f], [0x98], [0x80]],
      cap: 100,
      result: '\u{1f600}',
    },
    { description: 'a leading byte-order mark is kept as text', chunks: [[0xef, 0xbb, 0xbf, 0x7b, 0x7d]], cap: 100, result: '\ufeff{}' },
    { description: 'bytes that are not UTF-8 become replacement characters', chunks: [[0x61, 0xff], [0x62]], cap: 100, result: 'a\ufffdb' },
    {
      description: 'a body ending inside a character ends with a replacement character',
      chunks: [[0x61, 0xc3]],
      cap: 100,
      result: 'a\ufffd',
    },
  ];
  for (const row of rows) {
    it(row.description, async () => {
      const { res } = streamed(row.chunks);
      const read = readBodyCapped(res, { capBytes: row.cap, timeoutMs: 1_000 });
      if (typeof row.result === 'string') expect(await read).toBe(row.result);
      else await expect(read).rejects.toBeInstanceOf(row.result);
    });
  }

  it('stops reading as soon as the cap is passed, however long the body', async () => {
    const { res, pulled } = streamed(Array.from({ length: 1_000 }, () => 'x'.repeat(1_024)));
    await expect(readBodyCapped(res, { capBytes: 4_096, timeoutMs: 1_000 })).rejects.toThrow(/passed 4096 bytes/);
    expect(pulled()).toBeLessThan(10);
  });

  it('refuses a declared length over the cap without reading', async () => {
    const { res, pulled } = streamed(['x'], { headers: { 'content-length': '999999' } });
    await expect(readBodyCapped(res, { capBytes: 10, timeoutMs: 1_000 })).rejects.toThrow(/declares 999999 bytes/);
    expect(pulled()).toBe(0);
  });

  it('gives up on a body that stalls', async () => {
    const { res } = streamed(['{"data":'], { stallAfter: true });
    const err = await readBodyCapped(res, { capBytes: 1_000, timeoutMs: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RemoteApiError);
    expect(err).toMatchObject({ retryable: true, message: expect.stringMatching(/stalled for 100 ms/) });
  });

  it('stops when the signal aborts', async () => {
    const { res } = streamed(['{'], { stallAfter: true });
    const ctrl = new AbortController();
    setTimeout(() => ctrl.abort(new Error('caller gave up')), 50);
    await expect(readBodyCapped(res, { capBytes: 1_000, timeoutMs: 10_000, signal: ctrl.signal })).rejects.toThrow('caller gave up');
  });
});
