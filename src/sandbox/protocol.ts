import { z } from 'zod/v3';

/**
 * The pipe between the worker and a session's tool host: one JSON object per line, each way.
 *
 * worker -> host: `init` (once, first), then `call`, `cancel`, `timeout` and `thread-end`.
 * host -> worker: `ready` (after `init`), then one `result` per `call`.
 *
 * A call carries the key of its session thread when the runner named one; the host runs calls
 * concurrently and hands the toolset one thread context (key and signal) per key, which
 * `thread-end` aborts.
 *
 * The host runs the agent's code beside it, so everything it sends is untrusted: the worker checks
 * each line against {@link hostMessageSchema} and bounds its length; anything else ends the host.
 */

/** What the host needs to build the agent toolset: paths only, never a credential. */
export interface HostInit {
  t: 'init';
  workdir: string;
  allowedRoots: string[];
  readOnlyRoots: string[];
  maxFileBytes: number | null | undefined;
  /** Whether the toolset keeps a bash shell per session thread (else one shell serves every call). */
  shellPerThread?: boolean;
  /**
   * Listen on `127.0.0.1:port` of the sandbox's own loopback and hand that listener to the worker's
   * egress proxy over the host's IPC channel, before `ready` (see `network/egress-listener.ts`).
   */
  egress?: { port: number };
}

export interface HostCall {
  t: 'call';
  id: number;
  tool: string;
  input: unknown;
  /** The session thread's key, as the runner's thread context names it. */
  thread?: string;
}

/** The runner aborted the call: abort its signal (then kill what it started, if it does not stop). */
export interface HostCancel {
  t: 'cancel';
  id: number;
}

/** The call ran past the sandbox's per-call bound: kill what it started (then abort it, if it does not stop). */
export interface HostTimeout {
  t: 'timeout';
  id: number;
}

/** The thread's signal aborted (the thread ended): abort the thread context the tools hold. */
export interface HostThreadEnd {
  t: 'thread-end';
  thread: string;
}

export type WorkerMessage = HostInit | HostCall | HostCancel | HostTimeout | HostThreadEnd;

const blocks = z.array(z.object({ type: z.string() }).passthrough());
const content = z.union([z.string(), blocks]);

export const hostMessageSchema = z.discriminatedUnion('t', [
  z.object({ t: z.literal('ready') }).strict(),
  z.object({ t: z.literal('result'), id: z.number().int().nonnegative(), isError: z.boolean(), content }).strict(),
]);

export type HostMessage = z.output<typeof hostMessageSchema>;
export type ToolContent = z.output<typeof content>;

/**
 * Longest line the worker accepts from a host, in bytes. The toolset bounds its outputs (bash and
 * grep keep about 100 KiB, a whole-file read `maxFileBytes`), so a longer line is garbage.
 */
export const HOST_LINE_MAX_BYTES = 32 * 1024 * 1024;

/** One message as the line written to the pipe. */
export function encodeLine(message: WorkerMessage | HostMessage): string {
  return `${JSON.stringify(message)}\n`;
}

/**
 * Splits a byte stream into lines and parses each as a host message. `push` returns the messages
 * completed by a chunk, or a problem: a line that is not JSON, not a known message, or longer
 * than `maxBytes`. After a problem the decoder keeps failing (the stream is no longer trusted).
 */
export class LineDecoder {
  readonly #maxBytes: number;
  #parts: Buffer[] = [];
  #size = 0;
  #broken: string | undefined;

  constructor(maxBytes: number = HOST_LINE_MAX_BYTES) {
    this.#maxBytes = maxBytes;
  }

  push(chunk: Buffer): { messages: HostMessage[] } | { problem: string } {
    if (this.#broken !== undefined) return { problem: this.#broken };
    const messages: HostMessage[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
      const line = this.#take(chunk.subarray(start, nl));
      start = nl + 1;
      if (line === undefined) return this.#fail(`a line of more than ${this.#maxBytes} bytes`);
      const parsed = parseLine(line);
      if (typeof parsed === 'string') return this.#fail(parsed);
      messages.push(parsed);
    }
    if (start < chunk.length) {
      if (this.#size + chunk.length - start > this.#maxBytes) return this.#fail(`a line of more than ${this.#maxBytes} bytes`);
      this.#parts.push(Buffer.from(chunk.subarray(start)));
      this.#size += chunk.length - start;
    }
    return { messages };
  }

  #take(tail: Buffer): string | undefined {
    if (this.#size + tail.length > this.#maxBytes) return undefined;
    const whole = this.#parts.length === 0 ? tail : Buffer.concat([...this.#parts, tail]);
    this.#parts = [];
    this.#size = 0;
    return whole.toString('utf8');
  }

  #fail(problem: string): { problem: string } {
    this.#broken = problem;
    this.#parts = [];
    this.#size = 0;
    return { problem };
  }
}

function parseLine(line: string): HostMessage | string {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return `a line that is not JSON (${JSON.stringify(line.slice(0, 60))})`;
  }
  const parsed = hostMessageSchema.safeParse(value);
  return parsed.success ? parsed.data : `a message of unknown shape (${JSON.stringify(line.slice(0, 60))})`;
}
