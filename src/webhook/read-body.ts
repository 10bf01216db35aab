import type { IncomingMessage, ServerResponse } from 'node:http';

/** How reading a request body ended. */
export type BodyRead = { status: 'ok'; body: Buffer } | { status: 'too_large'; bytesRead: number } | { status: 'failed' };

/**
 * Read a request body of at most `maxBytes`. A body that declares more (`content-length`) or sends
 * more is answered 413 as soon as that is known and its connection closed (see
 * {@link answerAndClose}): nothing past the limit is buffered and the rest is not read.
 */
export function readBody(req: IncomingMessage, res: ServerResponse, maxBytes: number): Promise<BodyRead> {
  return new Promise((resolve) => {
    let bytesRead = 0;
    const chunks: Buffer[] = [];
    const refuse = (): void => {
      req.removeListener('data', onData);
      req.removeListener('end', onEnd);
      answerAndClose(req, res, 413, { error: `body over ${maxBytes} bytes` });
      resolve({ status: 'too_large', bytesRead });
    };
    const onData = (chunk: Buffer): void => {
      bytesRead += chunk.length;
      if (bytesRead > maxBytes) refuse();
      else chunks.push(chunk);
    };
    const onEnd = (): void => resolve({ status: 'ok', body: Buffer.concat(chunks) });
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxBytes) {
      refuse();
      return;
    }
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', () => {
      res.destroy();
      resolve({ status: 'failed' });
    });
  });
}

/**
 * Answer a request without reading (the rest of) its body: stop reading, send `status` with
 * `connection: close`, and destroy the socket once the answer is out (or after a second, for a
 * peer that never reads it).
 */
export function answerAndClose(req: IncomingMessage, res: ServerResponse, status: number, body: unknown): void {
  req.pause();
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', connection: 'close', 'content-length': Buffer.byteLength(text) });
  res.end(text, () => req.socket.destroy());
  setTimeout(() => req.socket.destroy(), 1_000).unref();
}
