/**
 * The tool host: the program the worker starts inside a session's sandbox. It builds the SDK's
 * own agent toolset for the paths `init` names and runs each `call` it is sent, answering on
 * stdout (see `protocol.ts`). It holds no credential and loads nothing but Node and the SDK, so
 * the sandbox needs no other package. It ends when its stdin closes (the worker went away).
 *
 * Calls run concurrently, each with the thread context of its session thread, and each process
 * the toolset starts is put down to the call it started in, so that a call that runs too long
 * can be stopped without the rest of the session (see `call-processes.ts`).
 *
 * Built as CommonJS so it can start lean: one host starts per session, and the SDK's toolset
 * reaches the SDK's root barrel (the whole API client, about 300 modules) through one import that
 * uses only `AnthropicError`. That import is answered with the SDK's own error module, which
 * defines that same class; any other name read from it loads the real barrel, so the toolset runs
 * exactly as written, on a tenth of the modules.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import * as net from 'node:net';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { getHeapStatistics } from 'node:v8';
import type { BetaRunnableTool, BetaToolRunContext } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { CallProcesses } from './call-processes.js';
import type { HostCall, HostInit, HostMessage, ToolContent, WorkerMessage } from './protocol.js';

type Loader = (request: string, parent: { filename?: string | null } | undefined, isMain: boolean) => unknown;
const ModuleClass = createRequire(__filename)('node:module') as { _load: Loader };
const load = ModuleClass._load;
const barrelImporter = `${path.sep}helpers${path.sep}beta${path.sep}json-schema.js`;
ModuleClass._load = function leanLoad(request, parent, isMain) {
  if ((request === '../../index.js' || request === '../../index') && parent?.filename?.endsWith(barrelImporter)) {
    const errors = leanErrors(parent);
    if (errors !== undefined) {
      return new Proxy(errors, { get: (t, k) => (k in t ? t[k] : (load(request, parent, isMain) as Record<PropertyKey, unknown>)[k]) });
    }
  }
  return load(request, parent, isMain);
};

/** The SDK's error module, when it is where this loader expects it and defines `AnthropicError`; else the barrel loads as written. */
function leanErrors(parent: { filename?: string | null }): Record<PropertyKey, unknown> | undefined {
  try {
    const errors = load('../../core/error.js', parent, false) as Record<PropertyKey, unknown>;
    return typeof errors['AnthropicError'] === 'function' ? errors : undefined;
  } catch {
    return undefined;
  }
}

const sdk = createRequire(__filename);
const { betaAgentToolset20260401 } = sdk(
  '@anthropic-ai/sdk/tools/agent-toolset/node',
) as typeof import('@anthropic-ai/sdk/tools/agent-toolset/node');
const { runRunnableTool } = sdk(
  '@anthropic-ai/sdk/lib/tools/BetaRunnableTool',
) as typeof import('@anthropic-ai/sdk/lib/tools/BetaRunnableTool');

/** Bytes the V8 heap may grow by from calls before the idle host collects (see {@link collectIfGrown}). */
const COLLECT_AFTER_GROWTH_BYTES = 1024 * 1024;
/** Milliseconds with no call running before the host collects (see {@link collectIfGrown}). */
const COLLECT_WHEN_IDLE_MS = 1_000;
/** Milliseconds between the first step of stopping a call and the second (see {@link stop}). */
const ESCALATE_AFTER_MS = 1_000;
/** Milliseconds between two kills of what a timed-out call starts while it has not answered. */
const KILL_AGAIN_MS = 50;

interface RunningCall {
  ctrl: AbortController;
  escalation?: NodeJS.Timeout;
  killAgain?: NodeJS.Timeout;
}

let tools: Map<string, BetaRunnableTool> | undefined;
let shellPerThread = false;
const running = new Map<number, RunningCall>();
/** One thread context signal per session thread key, aborted when the worker says the thread ended. */
const threads = new Map<string, AbortController>();
const processes = new CallProcesses();
/** The call whose code is running, for the processes it starts. */
const currentCall = new AsyncLocalStorage<number>();

// Each process the toolset starts is put down to the call it started in, so that a call that runs
// too long can be stopped alone (see call-processes.ts).
const childProcesses = createRequire(__filename)('node:child_process') as typeof import('node:child_process');
const spawnProcess = childProcesses.spawn;
childProcesses.spawn = function spawnForCall(this: unknown, ...args: unknown[]): ChildProcess {
  const child = (spawnProcess as (...a: unknown[]) => ChildProcess).apply(this, args);
  const callId = currentCall.getStore();
  if (callId !== undefined && child.pid !== undefined) {
    const options = (Array.isArray(args[1]) ? args[2] : args[1]) as { detached?: boolean } | undefined;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    processes.started(callId, child.pid, options?.detached === true, exited);
  }
  return child;
} as typeof childProcesses.spawn;

/** The V8 heap's committed bytes after the host's last collection (or at `ready`), or less if V8 gave memory back since. */
let heapAfterCollection = 0;
/** The pending collection of an idle host; cleared when a call starts. */
let idleCollection: NodeJS.Timeout | undefined;

/**
 * Give back what the calls held, once none runs: when the V8 heap grew by more than
 * {@link COLLECT_AFTER_GROWTH_BYTES} since the last collection, one full garbage collection
 * {@link COLLECT_WHEN_IDLE_MS} later, unless a call starts first. A large output (a long listing,
 * a big file) leaves its garbage in the old generation, which V8 collects only when allocation
 * calls for it, so a waiting host would keep it. Small calls are left alone: a full collection
 * puts back, by its whole delay, V8's memory reducer, which shrinks an idle process's heap. Needs
 * `gc` (the host runs with `--expose-gc`, see `session-sandbox.ts`).
 */
function collectIfGrown(): void {
  clearTimeout(idleCollection);
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined || running.size > 0) return;
  if (getHeapStatistics().total_physical_size - heapAfterCollection <= COLLECT_AFTER_GROWTH_BYTES) return;
  idleCollection = setTimeout(() => {
    gc();
    heapAfterCollection = getHeapStatistics().total_physical_size;
  }, COLLECT_WHEN_IDLE_MS);
}

function send(message: HostMessage): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/** Answer call `id` with the error that stopped the host from running it; nothing if even that fails. */
function answerFailed(id: number, e: unknown): void {
  try {
    send({ t: 'result', id, isError: true, content: `Error: the sandbox's tool host could not run this call (${(e as Error).message})` });
  } catch {
    // The answer cannot be written either: the worker sees the call fail when the host ends.
  }
}

// The worker reads stdout: once it is gone (EPIPE), no answer can reach it, and the host ends.
process.stdout.on('error', () => process.exit(0));

/**
 * The sandbox's only way out: listen on `127.0.0.1:port` of its own loopback (where the proxy
 * variables point) and send that listener to the worker over the IPC channel it started this host
 * with, so the worker's egress proxy accepts each connection itself and no process relays bytes.
 * Done before `ready`, so no tool runs before the port answers. This host's copy is closed once
 * sent, and so is the channel, before the toolset exists: no process the agent runs inherits it.
 */
async function handOverEgress(port: number): Promise<void> {
  if (process.send === undefined) throw new Error('it has no channel to hand its network listener to the worker');
  const send = process.send.bind(process);
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  await new Promise<void>((resolve, reject) => send({ t: 'egress-listener' }, server, {}, (e) => (e ? reject(e) : resolve())));
  server.close();
  process.disconnect();
}

async function init(message: HostInit): Promise<void> {
  if (message.egress) await handOverEgress(message.egress.port);
  shellPerThread = message.shellPerThread === true;
  const list = betaAgentToolset20260401({
    workdir: message.workdir,
    allowedRoots: message.allowedRoots,
    readOnlyRoots: message.readOnlyRoots,
    ...(message.maxFileBytes !== undefined ? { maxFileBytes: message.maxFileBytes } : {}),
  });
  tools = new Map(list.map((t) => [t.name, t]));
  heapAfterCollection = getHeapStatistics().total_physical_size;
  send({ t: 'ready' });
}

function threadSignal(key: string): AbortSignal {
  let ctrl = threads.get(key);
  if (ctrl === undefined) threads.set(key, (ctrl = new AbortController()));
  return ctrl.signal;
}

async function call(message: HostCall): Promise<void> {
  const tool = tools?.get(message.tool);
  if (!tool) {
    send({ t: 'result', id: message.id, isError: true, content: `Error: no tool named ${message.tool} in the sandbox` });
    return;
  }
  clearTimeout(idleCollection);
  // What V8 gave back on its own while the host waited lowers the mark the next calls grow from.
  if (running.size === 0) heapAfterCollection = Math.min(heapAfterCollection, getHeapStatistics().total_physical_size);
  const ctrl = new AbortController();
  const entry: RunningCall = { ctrl };
  running.set(message.id, entry);
  processes.begin(message.id, shellPerThread ? (message.thread ?? '') : '');
  // The toolset reads the signal and the thread context; the call's own event stays with the worker.
  const toolUse = { type: 'tool_use', id: `sandbox-${message.id}`, name: message.tool, input: message.input };
  const thread = message.thread === undefined ? {} : { _sessionThread: { key: message.thread, signal: threadSignal(message.thread) } };
  const context = { toolUse, toolUseBlock: toolUse, signal: ctrl.signal, ...thread } as unknown as BetaToolRunContext;
  try {
    const outcome = await currentCall.run(message.id, () => runRunnableTool(tool, message.input, context));
    send({ t: 'result', id: message.id, isError: outcome.isError, content: outcome.content as ToolContent });
  } finally {
    clearTimeout(entry.escalation);
    clearInterval(entry.killAgain);
    running.delete(message.id);
    processes.end(message.id);
    collectIfGrown();
  }
}

/**
 * Stop a running call in two steps, the second only if it still runs {@link ESCALATE_AFTER_MS}
 * later. Cancelled (the runner aborted it): abort its signal, as the runner asked, then kill the
 * processes it started. Timed out (past the sandbox's bound): kill the processes it started, and
 * any it starts later, until it answers, so its shell (exports, working folder, earlier background
 * jobs) lives on and the call answers with what it printed, the rest of its command line going on
 * as after a failed command; then abort its signal (the toolset ends that shell). The worker kills
 * the whole sandbox only when neither step brings an answer.
 */
function stop(id: number, how: 'cancel' | 'timeout'): void {
  const entry = running.get(id);
  if (entry === undefined || entry.escalation !== undefined) return;
  const kill = (): void => void processes.kill(id);
  const first = how === 'cancel' ? () => entry.ctrl.abort() : kill;
  const second = how === 'cancel' ? kill : () => entry.ctrl.abort();
  first();
  if (how === 'timeout') entry.killAgain = setInterval(kill, KILL_AGAIN_MS);
  entry.escalation = setTimeout(() => {
    if (running.get(id) === entry) second();
  }, ESCALATE_AFTER_MS);
}

function endThread(key: string): void {
  threads.get(key)?.abort();
  threads.delete(key);
}

function shutDown(): void {
  for (const entry of running.values()) entry.ctrl.abort();
  for (const ctrl of threads.values()) ctrl.abort();
  for (const tool of tools?.values() ?? []) {
    try {
      void tool.close?.();
    } catch {
      // Ending anyway: the sandbox takes every process with it.
    }
  }
  process.exit(0);
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  let message: WorkerMessage;
  try {
    message = JSON.parse(line) as WorkerMessage;
  } catch {
    return;
  }
  if (message.t === 'init' && tools === undefined) {
    init(message).catch((e: unknown) => {
      process.stderr.write(`the tool host could not start: ${(e as Error).message}\n`);
      process.exit(1);
    });
  } else if (message.t === 'call') {
    // One call's unexpected failure answers that call; the host and the other calls go on.
    call(message).catch((e: unknown) => {
      process.stderr.write(`tool call ${message.id} failed in the tool host: ${(e as Error).message}\n`);
      answerFailed(message.id, e);
    });
  } else if (message.t === 'cancel' || message.t === 'timeout') stop(message.id, message.t);
  else if (message.t === 'thread-end') endThread(message.thread);
});
lines.on('close', shutDown);
