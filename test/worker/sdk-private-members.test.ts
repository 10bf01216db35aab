// Pins every private member of the installed SDK this library relies on, so a release that drops or
// changes one fails here rather than silently changing the worker:
// - the client's `_tracer` and `_genAIProviderName` (src/worker/tracing.ts reads them for the work
//   span): present and of the expected shape on a client with spans on;
// - the runner's worker members (src/worker/runner-hooks.ts): the installed runner takes the send
//   retry window through `_setSendRetryWindow` (up to 1.15) or reads `_worker` (from 1.16): it asks
//   `_worker.sendRetryWindowMs()` when a failing post meets a stopping runner, and posts nothing once
//   `_worker.leaseLost` has aborted, where without it a stopped runner answers its held call.
import Anthropic from '@anthropic-ai/sdk';
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { SessionToolRunner } from '@anthropic-ai/sdk/lib/tools/SessionToolRunner';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RunnerHooks } from '../../src/worker/runner-hooks.js';
import { workTracers } from '../../src/worker/tracing.js';
import { harness, waitFor, type Harness } from './helpers.js';
import { traceKit } from './trace-tree.js';

const RESULTS = /^POST \/v1\/sessions\/[^/]+\/events$/;
const takesWindowByCall = typeof (SessionToolRunner.prototype as { _setSendRetryWindow?: unknown })._setSendRetryWindow === 'function';

describe("the client's tracing members", () => {
  it('a client with spans on has _tracer (with startSpan) and _genAIProviderName, which the work span reads', () => {
    const kit = traceKit();
    const client = new Anthropic({ apiKey: 'sk-test', baseURL: 'http://127.0.0.1:1', openTelemetry: { tracerProvider: kit.provider } });
    const c = client as unknown as { _tracer?: { startSpan?: unknown }; _genAIProviderName?: unknown };
    expect(typeof c._tracer?.startSpan).toBe('function');
    expect(c._genAIProviderName).toBe('anthropic');
    const tracers = workTracers(client);
    expect(tracers?.work).toBe(c._tracer);
    expect(tracers?.providerName).toBe('anthropic');
  });
});

describe("the runner's worker members", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  /** A bash tool that never returns on its own: it ends (with an error) only when its signal aborts. */
  function heldTool(onCall: () => void): BetaRunnableTool {
    return {
      name: 'bash',
      input_schema: { type: 'object' },
      parse: (x: unknown) => x,
      run: (_input: unknown, ctx?: { signal?: AbortSignal }) =>
        new Promise((_, reject) => {
          onCall();
          ctx?.signal?.addEventListener('abort', () => reject(new Error('held call aborted')), { once: true });
        }),
    } as unknown as BetaRunnableTool;
  }

  /**
   * A runner on a session whose one call its tool holds; once the call is held, the runner is
   * stopped (after its posts are abandoned when `abandonFirst`). Returns the results the session got.
   */
  async function stopWhileHeld(abandonFirst: boolean) {
    const { emu } = h;
    const { sessionId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'true' } }], end: 'idle' });
    const client = emu.sessionClient(sessionId);
    let held = false;
    const ctrl = new AbortController();
    const runner = new SessionToolRunner(sessionId, { client, tools: [heldTool(() => (held = true))], signal: ctrl.signal });
    const abandon = new AbortController();
    new RunnerHooks(() => 60_000).attach(runner, { abandon: abandon.signal });
    const iterating = (async () => {
      for await (const _ of runner);
    })().catch(() => {});
    await waitFor(() => held, 10_000, 'the call to be held');
    if (abandonFirst) abandon.abort();
    ctrl.abort();
    await iterating;
    // Any post would have gone out by now; give a late one a moment to land.
    await new Promise((r) => setTimeout(r, 300));
    return emu.session(sessionId).toolResults;
  }

  it('a stopped runner whose posts were abandoned answers nothing, on every version', async () => {
    expect(await stopWhileHeld(true)).toEqual([]);
  });

  it('without the abandon, a 1.16 runner answers its held call as stopped (so the member is what keeps it unanswered)', async () => {
    const results = await stopWhileHeld(false);
    if (takesWindowByCall) {
      // Up to 1.15 a stopped runner posts nothing at all.
      expect(results).toEqual([]);
    } else {
      expect(results.map((r) => r.text)).toEqual(["tool 'bash' was stopped, and may have already done some or all of its work"]);
    }
  });

  it('the runner takes the send retry window: by _setSendRetryWindow, or by asking _worker.sendRetryWindowMs() when a failing post meets a stopping runner', async () => {
    const { emu } = h;
    const { sessionId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'true' } }], end: 'idle' });
    const client = emu.sessionClient(sessionId);
    const fault = emu.faults.add({ route: RESULTS, status: 503, shouldRetry: false });
    const ctrl = new AbortController();
    const tool = {
      name: 'bash',
      input_schema: { type: 'object' },
      parse: (x: unknown) => x,
      run: async () => 'ran',
    } as unknown as BetaRunnableTool;
    const runner = new SessionToolRunner(sessionId, { client, tools: [tool], signal: ctrl.signal, maxIdleMs: 0 });
    const given: number[] = [];
    const r = runner as unknown as { _setSendRetryWindow?: (ms: number) => void };
    const original = r._setSendRetryWindow;
    if (typeof original === 'function') r._setSendRetryWindow = (ms) => (given.push(ms), original.call(runner, ms));
    const hooks = new RunnerHooks(() => 1_000);
    hooks.attach(runner, { abandon: new AbortController().signal });
    let asked = 0;
    const worker = (runner as unknown as { _worker: { sendRetryWindowMs: () => number } })._worker;
    const read = worker.sendRetryWindowMs;
    worker.sendRetryWindowMs = () => (asked++, read());
    const iterating = (async () => {
      for await (const _ of runner);
    })().catch(() => {});
    await waitFor(() => fault.hits > 0, 10_000, 'the first failing post');
    // Past the 1 s window: a stopping runner gives the post up at once (5 min, or 30 s once stopped, without it).
    await new Promise((res) => setTimeout(res, 1_200));
    const stoppedAt = Date.now();
    ctrl.abort();
    await iterating;

    expect(Date.now() - stoppedAt).toBeLessThan(10_000);
    if (takesWindowByCall) expect(given).toEqual([1_000]);
    else expect(asked).toBeGreaterThan(0);
    expect(given.length > 0 || asked > 0).toBe(true);
  });
});
