import type { ServerResponse } from 'node:http';

/** One open event stream. */
interface OpenStream {
  res: ServerResponse;
  keepAlive: NodeJS.Timeout;
}

/**
 * The open SSE streams of one session: frames every event as `event: <type>` + `data: <json>`,
 * sends `: keep-alive` comments, and can end (cleanly) or cut (abruptly) every stream.
 */
export class StreamHub {
  readonly #streams = new Set<OpenStream>();
  readonly #keepAliveMs: number;

  constructor(keepAliveMs: number) {
    this.#keepAliveMs = keepAliveMs;
  }

  get size(): number {
    return this.#streams.size;
  }

  /** Send the headers at once and keep `res` open until it is ended, cut or closed by the client. */
  open(res: ServerResponse, headers: Record<string, string>): void {
    res.writeHead(200, {
      ...headers,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    res.flushHeaders();
    const stream: OpenStream = {
      res,
      keepAlive: setInterval(() => {
        if (!res.writableEnded) res.write(': keep-alive\n\n');
      }, this.#keepAliveMs),
    };
    stream.keepAlive.unref();
    this.#streams.add(stream);
    res.on('close', () => {
      clearInterval(stream.keepAlive);
      this.#streams.delete(stream);
    });
  }

  /** Write one event frame to `res` only. */
  static write(res: ServerResponse, event: { type: string }): void {
    if (!res.writableEnded && !res.destroyed) res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
  }

  broadcast(event: { type: string }): void {
    for (const stream of this.#streams) StreamHub.write(stream.res, event);
  }

  /** End every stream cleanly (the client sees the body end). */
  endAll(): void {
    for (const stream of [...this.#streams]) {
      clearInterval(stream.keepAlive);
      this.#streams.delete(stream);
      stream.res.end();
    }
  }

  /** Cut every stream abruptly (the client sees a network error). Returns how many were cut. */
  cutAll(): number {
    const count = this.#streams.size;
    for (const stream of [...this.#streams]) {
      clearInterval(stream.keepAlive);
      this.#streams.delete(stream);
      stream.res.destroy();
    }
    return count;
  }
}
