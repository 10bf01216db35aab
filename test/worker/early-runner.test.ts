// Pins the session's runner starting while its stores mount: the event stream opens before the
// mount is done, yet no tool call runs (nor any result is posted) before it; a mount that fails
// after the stream opened fails the item with the mount's error and answers no call; a mount that
// outlasts the early runner's wait replaces that runner by one started after the mount, and the
// held call runs once. The session's sandbox starts while the contents download; a `tools` factory
// is still called after the mount, with the store folders in its context.
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { betaAgentToolset20260401 } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import type { WorkerInternals } from '../../src/worker/environment-worker.js';
import { harness, waitFor, type Harness } from './helpers.js';

/** Pids of this process's children that are `bwrap` running a session's tool host. */
function bwrapChildren(): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = fs.readFileSync(`/proc/${entry}/status`, 'utf8');
      if (!/^Name:\s+bwrap$/m.test(status) || !new RegExp(`^PPid:\\s+${process.pid}$`, 'm').test(status)) continue;
      // A session's tool host, not the probe the worker runs when it starts.
      if (fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('tool-host')) out.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

const LIST = /^GET \/v1\/memory_stores\/[^/]+\/memories$/;
const STREAM = 'GET /v1/sessions/:id/events/stream';
const RESULTS = 'POST /v1/sessions/:id/events';

describe('the runner starts while the stores mount', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  /** A session with one store of a few folders, whose one tool call reads a memory. */
  async function sessionReadingAMemory() {
    const memories: Record<string, string> = {};
    for (let i = 0; i < 30; i++) memories[`/f${i % 3}/m${i}.md`] = `memory ${i}`;
    const store = await h.emu.createMemoryStore({ name: 'Notes', memories });
    const file = path.join(h.mountRoot, 'notes', 'f2', 'm29.md');
    const s = await h.emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [{ tool: 'bash', input: { command: `cat ${JSON.stringify(file)}` } }],
    });
    return { ...s, storeId: store.id };
  }

  /** Counts the real runs of each session's tools (replays answered from the record are not runs). */
  function countingRuns(): { runs: string[]; wrapTools: (tools: BetaRunnableTool[]) => BetaRunnableTool[] } {
    const runs: string[] = [];
    return {
      runs,
      wrapTools: (tools) =>
        tools.map((t) => ({
          ...t,
          run: (input: unknown, ctx?: unknown) => {
            runs.push(String((t as { name?: unknown }).name));
            return (t.run as (i: unknown, c?: unknown) => ReturnType<BetaRunnableTool['run']>)(input, ctx);
          },
        })) as BetaRunnableTool[],
    };
  }

  /**
   * Serve {@link sessionReadingAMemory} with every listing answered `latencyMs` late, counting the
   * tools' real runs; `mountEnd` is when `sessionStarted` came (the mount done).
   */
  async function serveWithSlowListings(latencyMs: number, internals: WorkerInternals = {}) {
    const { sessionId } = await sessionReadingAMemory();
    h.emu.faults.add({ route: LIST, latencyMs });
    const { runs, wrapTools } = countingRuns();
    const worker = h.worker({}, { ...internals, wrapTools });
    let mountEnd = Infinity;
    worker.on('sessionStarted', () => (mountEnd = Date.now()));
    const running = worker.run();
    const done = await h.emu.waitForSession(sessionId, { timeoutMs: 20_000 });
    await worker.close();
    await running;
    return { sessionId, runs, done, mountEnd };
  }

  it('opens the event stream before the mount is done, and runs the first call only after it', async () => {
    const { emu } = h;
    const { sessionId, runs, done, mountEnd } = await serveWithSlowListings(300);

    const mountLists = emu.requests.filter((r) => LIST.test(`${r.method} ${r.path}`) && r.startedAt < mountEnd);
    expect(mountLists.length).toBeGreaterThan(0);
    expect(Math.max(...mountLists.map((r) => r.startedAt + r.ms))).toBeLessThanOrEqual(mountEnd);
    const stream = emu.requests.filter((r) => r.route === STREAM && r.path.includes(sessionId));
    const results = emu.requests.filter((r) => r.route === RESULTS && r.path.includes(sessionId) && r.method === 'POST');
    expect(stream.length).toBe(1);
    expect(stream[0]!.startedAt).toBeLessThan(mountEnd);
    expect(results.length).toBeGreaterThan(0);
    expect(Math.min(...results.map((r) => r.startedAt))).toBeGreaterThanOrEqual(mountEnd);
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['memory 29']);
    expect(runs).toEqual(['bash']);
  });

  it('fails the item with the mount error when the mount fails after the stream opened, answering no call', async () => {
    const { emu } = h;
    const { sessionId, workId } = await sessionReadingAMemory();
    emu.faults.add({ route: LIST, latencyMs: 300, status: 403, message: 'no access to this store' });
    const { runs, wrapTools } = countingRuns();
    const worker = h.worker({}, { wrapTools });
    const failed: Error[] = [];
    worker.on('workFailed', (e) => failed.push(e.error));
    const started: string[] = [];
    worker.on('sessionStarted', (e) => started.push(e.sessionId));
    const running = worker.run();
    await waitFor(() => failed.length > 0 && emu.workItem(workId).state === 'stopped', 20_000, 'the item to fail and be stopped');
    await worker.close();
    await running;

    expect(emu.requests.some((r) => r.route === STREAM && r.path.includes(sessionId))).toBe(true);
    expect(failed).toHaveLength(1);
    expect(failed[0]!.message).toContain('downloading into');
    expect(failed[0]!.message).toContain('no access to this store');
    expect(started).toEqual([]);
    expect(runs).toEqual([]);
    expect(emu.session(sessionId).toolResults).toEqual([]);
    expect(emu.requests.some((r) => r.route === RESULTS && r.method === 'POST' && r.path.includes(sessionId))).toBe(false);
    expect(emu.workItem(workId).state).toBe('stopped');
  });

  it('replaces a runner the mount outlasted by one started after it, and runs the held call once', async () => {
    const { emu } = h;
    const { sessionId, runs, done, mountEnd } = await serveWithSlowListings(800, { earlyRunnerWaitMs: 200 });

    const streams = emu.requests.filter((r) => r.route === STREAM && r.path.includes(sessionId));
    expect(streams.length).toBe(2);
    expect(streams[0]!.startedAt).toBeLessThan(mountEnd);
    expect(streams[1]!.startedAt).toBeGreaterThanOrEqual(mountEnd);
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['memory 29']);
    expect(runs).toEqual(['bash']);
    expect(h.capture.lines.some((l) => l.msg.includes('the mount outlasted the early runner'))).toBe(true);
  });

  it('starts the session sandbox while the contents download, before the mount is done', async () => {
    const { emu } = h;
    const { sessionId } = await sessionReadingAMemory();
    // Every listing is slow, so the contents arrive well after the folders exist.
    emu.faults.add({ route: LIST, latencyMs: 700 });
    const worker = h.worker({ sandbox: 'bwrap' });
    let mounted = false;
    let sandboxBeforeMount = false;
    worker.on('sessionStarted', () => (mounted = true));
    const running = worker.run();
    await waitFor(
      () => {
        if (!mounted && bwrapChildren().length > 0) sandboxBeforeMount = true;
        return sandboxBeforeMount || mounted;
      },
      20_000,
      'a sandbox, or the mount done',
    );
    const done = await emu.waitForSession(sessionId, { timeoutMs: 20_000 });
    await worker.close();
    await running;

    expect(sandboxBeforeMount).toBe(true);
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['memory 29']);
  });

  it('calls a tools factory after the mount, with the store folders in its context', async () => {
    const { emu } = h;
    const { sessionId } = await sessionReadingAMemory();
    emu.faults.add({ route: LIST, latencyMs: 300 });
    const seen: Array<{ roots: string[]; files: boolean }> = [];
    const file = path.join(h.mountRoot, 'notes', 'f2', 'm29.md');
    const worker = h.worker({
      tools: (ctx) => {
        seen.push({ roots: [...(ctx.allowedRoots ?? [])], files: fs.existsSync(file) });
        return betaAgentToolset20260401(ctx);
      },
    });
    const running = worker.run();
    const done = await emu.waitForSession(sessionId, { timeoutMs: 20_000 });
    await worker.close();
    await running;

    expect(seen).toEqual([{ roots: [path.join(h.mountRoot, 'notes')], files: true }]);
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['memory 29']);
  });
});
