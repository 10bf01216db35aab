/**
 * A session's sandbox called as the SDK runner calls it: each call with a signal of its own and,
 * from 1.16, the session thread context (`_sessionThread`: the thread's key and a signal aborted
 * when the thread ends).
 */
import pino from 'pino';
import { resolveSandboxOption } from '../../src/sandbox/options.js';
import { resolveSandbox } from '../../src/sandbox/resolve.js';
import { SessionSandbox } from '../../src/sandbox/session-sandbox.js';

const log = pino({ level: 'silent' });

/** A session sandbox with the toolset run in bubblewrap; `toolTimeoutMs` defaults to the SDK runner's bound. */
export async function sessionSandbox(work: string, toolTimeoutMs?: number): Promise<SessionSandbox> {
  const runtime = await resolveSandbox(resolveSandboxOption({ mode: 'bwrap', ...(toolTimeoutMs ? { toolTimeoutMs } : {}) }), {
    log,
    concurrency: 1,
  });
  if (runtime.kind !== 'bwrap') throw new Error('the sandbox did not start');
  return new SessionSandbox(runtime, { workdir: work, allowedRoots: [], readOnlyRoots: [], maxFileBytes: undefined, hide: [] }, log);
}

/** A session thread as the runner names it, with the controller that ends it. */
export function thread(name: string): { key: string; end: AbortController } {
  return { key: `sesn_test/${name}`, end: new AbortController() };
}

/** Run a tool as the 1.16 runner does: a signal of its own and the thread context. */
export async function run(
  sandbox: SessionSandbox,
  tool: string,
  input: object,
  on?: { key: string; end: AbortController },
  signal: AbortSignal = new AbortController().signal,
): Promise<{ ok: boolean; text: string }> {
  const t = sandbox.tools().find((x) => x.name === tool)!;
  const context = {
    toolUse: { type: 'tool_use', id: 'toolu_test', name: tool, input },
    signal,
    ...(on ? { _sessionThread: { key: on.key, signal: on.end.signal } } : {}),
  };
  try {
    const out = await t.run(input, context as never);
    return { ok: true, text: typeof out === 'string' ? out : JSON.stringify(out) };
  } catch (e) {
    return { ok: false, text: (e as Error).message };
  }
}
