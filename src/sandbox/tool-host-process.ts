import type { ChildProcess } from 'node:child_process';
import type * as net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../internal/logger.js';
import { LaunchedSandbox, SANDBOX_START_TIMEOUT_MS, type SandboxLaunch } from './launcher.js';
import { checkHandedListener, closeHandle } from './network/egress-listener.js';
import { encodeLine, LineDecoder, type HostInit, type ToolContent, type WorkerMessage } from './protocol.js';

/**
 * How a call in the sandbox ended. `timedOut`: it ran past its bound, the processes it started
 * were killed and it answered with what it had (the host lives on). `failed`: the host could not
 * answer it (it died, hung or broke the protocol).
 */
export type HostCallResult =
  | { kind: 'answered'; isError: boolean; content: ToolContent }
  | { kind: 'timedOut'; timeoutMs: number; content: ToolContent }
  | { kind: 'failed'; message: string };

/** The session thread a call belongs to, as the runner's thread context names it. */
export interface CallThread {
  key: string;
  /** Aborted when the thread ended. */
  signal: AbortSignal;
}

/** Milliseconds a host may take to start (namespaces, Node, the SDK toolset) before it is given up. */
export const HOST_START_TIMEOUT_MS = SANDBOX_START_TIMEOUT_MS;
/**
 * Milliseconds a cancelled or timed-out call may take to answer before its host is killed: the
 * host stops it in two steps a second apart (see tool-host.ts), each of which ends it normally.
 */
const STOP_GRACE_MS = 5_000;
/** Milliseconds a closed host has to end by itself before it is killed. */
const CLOSE_GRACE_MS = 1_000;
/** Milliseconds to wait for the sandbox to be gone after the kill. */
const EXIT_WAIT_MS = 5_000;
/** Bytes of the host's stderr kept to explain a failure. */
const STDERR_TAIL_BYTES = 2_048;

interface Pending {
  resolve(result: HostCallResult): void;
}

/**
 * One tool host process under bubblewrap, seen from the worker: started with the command line
 * the view built, told its paths, then sent calls. Whatever the host does (dies, hangs, writes
 * garbage), a call resolves, never rejects, and the worker carries on; a host that failed once
 * is dead for good (the session starts a new one for its next call).
 *
 * Killing it kills the sandbox's first process, the PID namespace's init: the kernel then ends
 * every process in the namespace (background jobs included) before bubblewrap itself exits, so
 * once {@link close} resolves nothing the agent started is left running.
 */
export class ToolHostProcess {
  readonly #child: ChildProcess;
  readonly #sandbox: LaunchedSandbox;
  readonly #log: Logger;
  readonly #decoder = new LineDecoder();
  readonly #pending = new Map<number, Pending>();
  /** The threads whose end the host is told of, by key: the signal that tells it and its listener. */
  readonly #threads = new Map<string, { signal: AbortSignal; ended: () => void }>();
  readonly #exited: Promise<void>;
  #nextId = 1;
  #failure: string | undefined;
  #stderr = '';
  /** close() ended the host's stdin: its exit is the expected end, not a failure. */
  #closing = false;
  #ready: Promise<string | undefined>;
  /** The session's proxy, when the host hands it its loopback listener (see `egress-listener.ts`). */
  readonly #egress: EgressAdopter | undefined;
  /** The host answered `ready`; with a hand-over pending, ready waits for the listener too. */
  #readyLine = false;
  /** The adopted listener, released when the host ends. */
  #adopted: { release(): void } | undefined;
  readonly #egressPort: number;

  /**
   * `launch`: the sandbox to start, as the launcher takes it (its IPC channel is added here when
   * `egress` is to adopt the host's loopback listener).
   */
  constructor(spec: { launch: Omit<SandboxLaunch, 'channel'>; init: HostInit; log: Logger; egress?: EgressAdopter | undefined }) {
    this.#log = spec.log;
    // With an egress proxy to adopt the sandbox's listener, the host gets an IPC channel (the last
    // descriptor) that carries that listener and nothing else.
    const handOver = spec.egress !== undefined && spec.init.egress !== undefined ? spec.egress : undefined;
    this.#egress = handOver;
    this.#egressPort = spec.init.egress?.port ?? 0;
    this.#sandbox = new LaunchedSandbox({ ...spec.launch, channel: handOver !== undefined });
    this.#child = this.#sandbox.child;
    if (handOver) this.#child.on('message', (message: unknown, handle: unknown) => this.#onHandOver(message, handle));
    // Node counts an IPC channel toward 'close' only when the host closes it first; the worker
    // closes its end on the hand-over, so with a channel the host's exit is the end to wait for.
    this.#exited = new Promise((resolve) => this.#child.once(handOver ? 'exit' : 'close', () => resolve()));
    this.#child.stdin?.on('error', () => {});
    this.#child.stderr?.on('data', (d: Buffer) => {
      this.#stderr = (this.#stderr + d.toString('utf8')).slice(-STDERR_TAIL_BYTES);
    });
    let ready: (problem: string | undefined) => void = () => {};
    this.#ready = new Promise((resolve) => (ready = resolve));
    const startTimer = setTimeout(
      () => this.#fail(`the tool host did not start within ${HOST_START_TIMEOUT_MS} ms`),
      HOST_START_TIMEOUT_MS,
    );
    this.#onReady = (problem) => {
      clearTimeout(startTimer);
      ready(problem);
    };
    this.#child.stdout?.on('data', (chunk: Buffer) => this.#onData(chunk));
    this.#child.once('error', (e) => this.#fail(`the sandbox could not start (${e.message})`));
    this.#child.once('exit', (code, signal) => {
      if (this.#closing) return this.#fail('the session ended');
      const how = signal ? `signal ${signal}` : `exit code ${code}`;
      const tail = this.#stderr.trim().split('\n').slice(-3).join(' | ');
      this.#fail(`the tool host ended (${how})${tail ? `: ${tail}` : ''}`);
    });
    this.#send(spec.init);
  }

  /**
   * The host's one message over its channel: its loopback listener, checked, then served by the
   * session's proxy. The channel is closed on the first message, whatever it holds; a refused one
   * ends the host (a host that works never sends one).
   */
  #onHandOver(message: unknown, handle: unknown): void {
    if (this.#child.connected) this.#child.disconnect();
    if (this.#adopted !== undefined || this.#failure !== undefined || this.#egress === undefined) return closeHandle(handle);
    const port = this.#egressPort;
    const checked = checkHandedListener(message, handle, port);
    if ('problem' in checked) {
      this.#log.warn({ problem: checked.problem }, 'sandbox tool host handed over something other than its network listener; refused');
      return this.#fail(`the tool host handed over ${checked.problem}`);
    }
    this.#adopted = this.#egress.adopt(checked.listener);
    if (this.#readyLine) this.#onReady(undefined);
  }

  #onReady: (problem: string | undefined) => void;

  /** The host-side pid of the sandbox's init, once bubblewrap reported it. */
  get sandboxPid(): number | undefined {
    return this.#sandbox.sandboxPid;
  }

  /** False once the host failed or was closed. */
  get alive(): boolean {
    return this.#failure === undefined;
  }

  /** Resolves once the host answered `init` (`undefined`), or with why it never will. */
  ready(): Promise<string | undefined> {
    return this.#ready;
  }

  /**
   * Run one tool call in the sandbox; calls run concurrently. After `timeoutMs` the host kills the
   * processes the call started and it answers `timedOut`; when `signal` aborts the host aborts the
   * call. A call that still has not answered `STOP_GRACE_MS` after either kills the host, as do a
   * dead host and a malformed answer. `thread`: the call's session thread, whose end the host is
   * told of.
   */
  async call(
    tool: string,
    input: unknown,
    opts: { timeoutMs: number; signal?: AbortSignal | null | undefined; thread?: CallThread | undefined },
  ): Promise<HostCallResult> {
    const problem = await this.#ready;
    if (problem !== undefined) return { kind: 'failed', message: problem };
    // The host may have failed after it was ready and before this call was registered: nothing
    // would then answer it.
    if (this.#failure !== undefined) return { kind: 'failed', message: this.#failure };
    const id = this.#nextId++;
    return new Promise<HostCallResult>((resolve) => {
      let grace: NodeJS.Timeout | undefined;
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        this.#send({ t: 'timeout', id });
        grace ??= setTimeout(
          () => this.#fail(`the tool call was still running after ${opts.timeoutMs} ms and did not stop`),
          STOP_GRACE_MS,
        );
      }, opts.timeoutMs);
      const onAbort = (): void => {
        this.#send({ t: 'cancel', id });
        grace ??= setTimeout(() => this.#fail('the tool call did not stop when cancelled'), STOP_GRACE_MS);
      };
      this.#pending.set(id, {
        resolve: (result) => {
          clearTimeout(timer);
          if (grace) clearTimeout(grace);
          opts.signal?.removeEventListener('abort', onAbort);
          resolve(
            timedOut && result.kind === 'answered' ? { kind: 'timedOut', timeoutMs: opts.timeoutMs, content: result.content } : result,
          );
        },
      });
      if (opts.signal?.aborted) onAbort();
      else opts.signal?.addEventListener('abort', onAbort, { once: true });
      this.#send({ t: 'call', id, tool, input, ...(opts.thread !== undefined ? { thread: opts.thread.key } : {}) });
      if (opts.thread !== undefined) this.#watchThread(opts.thread);
    });
  }

  /** Tell the host when the thread ends (once per thread and signal); the listener goes with the host. */
  #watchThread(thread: CallThread): void {
    const watched = this.#threads.get(thread.key);
    if (watched?.signal === thread.signal) return;
    if (watched !== undefined) watched.signal.removeEventListener('abort', watched.ended);
    const ended = (): void => {
      if (this.#threads.get(thread.key)?.signal === thread.signal) this.#threads.delete(thread.key);
      this.#send({ t: 'thread-end', thread: thread.key });
    };
    if (thread.signal.aborted) return ended();
    this.#threads.set(thread.key, { signal: thread.signal, ended });
    thread.signal.addEventListener('abort', ended, { once: true });
  }

  /** Kill the sandbox and wait (bounded) until every process in it is gone. Idempotent. */
  async close(): Promise<void> {
    if (this.#failure === undefined && this.#child.exitCode === null && this.#child.signalCode === null) {
      // The host ends itself when its stdin closes; bubblewrap's init then ends whatever is left in
      // the namespace. Killed only if that takes too long (a host stopped by the agent).
      this.#closing = true;
      this.#child.stdin?.end();
      const graceful = await Promise.race([this.#exited.then(() => true), sleep(CLOSE_GRACE_MS).then(() => false)]);
      if (graceful) {
        this.#fail('the session ended');
        return;
      }
    }
    this.#fail('the session ended');
    await this.#exited;
  }

  #send(message: WorkerMessage): void {
    if (this.#failure !== undefined) return;
    this.#child.stdin?.write(encodeLine(message));
  }

  #onData(chunk: Buffer): void {
    const decoded = this.#decoder.push(chunk);
    if ('problem' in decoded) return this.#fail(`the tool host sent ${decoded.problem}`);
    for (const m of decoded.messages) {
      if (m.t === 'ready') {
        this.#readyLine = true;
        if (this.#egress === undefined || this.#adopted !== undefined) this.#onReady(undefined);
        continue;
      }
      const pending = this.#pending.get(m.id);
      if (!pending) return this.#fail(`the tool host answered call ${m.id}, which is not running`);
      this.#pending.delete(m.id);
      pending.resolve({ kind: 'answered', isError: m.isError, content: m.content });
    }
  }

  /** Mark the host failed for good, kill its sandbox, and fail what is waiting on it. */
  #fail(message: string): void {
    if (this.#failure !== undefined) return;
    this.#failure = message;
    // The worker's copy of the sandbox's listener would keep its network namespace alive.
    this.#adopted?.release();
    if (this.#child.connected) this.#child.disconnect();
    this.#kill();
    this.#onReady(message);
    for (const p of this.#pending.values()) p.resolve({ kind: 'failed', message });
    this.#pending.clear();
    // A session thread outlives its hosts: a dead host keeps no listener on its signal.
    for (const { signal, ended } of this.#threads.values()) signal.removeEventListener('abort', ended);
    this.#threads.clear();
    if (message !== 'the session ended') this.#log.warn({ reason: message }, 'sandbox tool host failed; its call answers with an error');
  }

  #kill(): void {
    this.#child.stdin?.destroy();
    // Gone already (bubblewrap exits only once its namespace is empty): its init's pid may be reused.
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    // The init first: bubblewrap then exits once the kernel has ended the whole namespace.
    const init = this.#sandbox.sandboxPid;
    if (init !== undefined) {
      try {
        process.kill(init, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    const fallback = setTimeout(() => this.#child.kill('SIGKILL'), init === undefined ? 0 : EXIT_WAIT_MS);
    fallback.unref();
    void this.#exited.then(() => clearTimeout(fallback));
  }
}

/** Where the session's egress proxy takes the listener a host hands over. */
export interface EgressAdopter {
  adopt(listener: net.Server): { release(): void };
}
