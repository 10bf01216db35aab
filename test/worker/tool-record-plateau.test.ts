// Pins "a daemon that runs for weeks plateaus" for the tool record: a worker serving sessions whose
// tool calls return large outputs keeps none of them once their results are posted (the session's
// history answers a replay from then on). Instrumented: the record the worker uses is inspected.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentWorker } from '../../src/worker/environment-worker.js';
import { ToolCallRecord } from '../../src/worker/tool-guard.js';
import { harness, type Harness } from './helpers.js';

describe('the tool record after posted results', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('keeps nothing of 3 sessions x 5 calls of 64 KiB output each once their results are posted', async () => {
    const record = new ToolCallRecord();
    const seen: number[] = [];
    const calls = 5;
    const sessions: string[] = [];
    for (let s = 0; s < 3; s++) {
      const script = [];
      for (let i = 0; i < calls; i++) {
        script.push({ tool: 'bash', input: { command: `head -c 65536 /dev/zero | tr '\\0' ${String.fromCharCode(97 + i)}` } });
        // Between two calls, the previous result was posted: the record holds at most the one running.
        script.push({ console: async () => void seen.push(record.outcomes) });
      }
      sessions.push((await h.emu.createSession({ script })).sessionId);
    }
    const worker = new EnvironmentWorker(
      {
        client: h.client,
        environmentId: h.emu.environmentId,
        environmentKey: h.emu.environmentKey,
        workdir: h.workdir,
        stateDir: h.stateDir,
        concurrency: 3,
        logger: h.capture.logger,
      },
      { toolRecord: record },
    );
    const running = worker.run();
    try {
      for (const id of sessions) {
        const done = await h.emu.waitForSession(id, { timeoutMs: 30_000 });
        expect(done.toolResults).toHaveLength(calls);
        // Large results either way: the SDK's bash tool returns the whole 64 KiB up to 1.15, and from
        // 1.16 on keeps 30 000 characters (the rest saved to a file the result names).
        expect(done.toolResults.every((r) => r.text.length >= 30_000)).toBe(true);
      }
    } finally {
      await worker.close();
      await running;
    }
    expect(seen).toHaveLength(3 * calls);
    expect(Math.max(...seen)).toBeLessThanOrEqual(3);
    expect({ outcomes: record.outcomes, bytes: record.bytes, sessions: record.sessions }).toEqual({ outcomes: 0, bytes: 0, sessions: 0 });
  }, 60_000);
});
