// Pins "a tool call runs at most once per tool_use id". Up to SDK 1.15, when a result post fails for
// good and the event stream drops right after, the runner reconnects, reads the history, sees the
// call unanswered and dispatches it again: our worker answers the replay from its record (the bash
// command that appends a line ran once), and the official worker, under the same fault, runs it
// twice — the control that shows the fault really replays the call. From 1.16 the runner posts a
// short error result in place of a refused one, so the call is answered and never replayed: both
// workers run it once, and the tests check that instead. The record outlives the item: when the
// lease is lost after a tool ran but before its result was posted, and the server delivers the item
// anew to the same worker, the new run answers that call from the record too.
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { EnvironmentWorker as OfficialWorker } from '@anthropic-ai/sdk/lib/environments/worker';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sdkAtLeast } from '../sdk-version.js';
import { harness, type Harness } from './helpers.js';

/** Whether the installed runner answers a refused result with an error result instead of replaying the call. */
const ANSWERS_REFUSED_RESULTS = sdkAtLeast('1.16.0');

const RESULT_POST = /^POST \/v1\/sessions\/[^/]+\/events$/;
const HEARTBEAT = /\/heartbeat$/;

async function appendScenario(h: Harness) {
  const logFile = path.join(h.workdir, 'appended.log');
  const { sessionId } = await h.emu.createSession({
    script: [
      { tool: 'bash', input: { command: `echo ran >> ${JSON.stringify(logFile)}` } },
      { tool: 'bash', input: { command: 'echo second' } },
    ],
  });
  // The first result post fails with a permanent 400, then every open stream of the session is cut.
  h.emu.faults.add({ route: RESULT_POST, status: 400, times: 1, dropStream: true });
  return { logFile, sessionId };
}

describe('a tool call replayed after a failed result post', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('runs once with our worker and is answered from the record', async () => {
    const { logFile, sessionId } = await appendScenario(h);
    const worker = h.worker();
    const running = worker.run();
    const done = await h.emu.waitForSession(sessionId, { timeoutMs: 20_000 });
    await worker.close();
    await running;

    expect(await fsp.readFile(logFile, 'utf8')).toBe('ran\n');
    const posts = h.emu.requests.filter((r) => RESULT_POST.test(`${r.method} ${r.path}`));
    expect(posts.map((r) => r.status)).toEqual([400, 200, 200]);
    expect(done.toolResults.map((r) => r.name)).toEqual(['bash', 'bash']);
    expect(h.capture.lines.some((l) => /replayed; answering with the recorded result/.test(l.msg))).toBe(!ANSWERS_REFUSED_RESULTS);
  });

  it('runs twice with the official worker under the same fault up to SDK 1.15, once from 1.16 (control)', async () => {
    const { logFile, sessionId } = await appendScenario(h);
    const client = new Anthropic({ apiKey: 'sk-ant-api-operator-key', baseURL: h.emu.baseURL, logLevel: 'off' });
    const official = new OfficialWorker({
      client,
      environmentId: h.emu.environmentId,
      environmentKey: h.emu.environmentKey,
      workdir: h.workdir,
    });
    const stop = new AbortController();
    const running = official.run(stop.signal);
    try {
      await h.emu.waitForSession(sessionId, { timeoutMs: 20_000 });
    } finally {
      stop.abort();
      await running.catch(() => undefined);
    }
    expect(await fsp.readFile(logFile, 'utf8')).toBe(ANSWERS_REFUSED_RESULTS ? 'ran\n' : 'ran\nran\n');
  });

  it('runs once when the item is delivered anew after the lease was lost before the result was posted', async () => {
    const logFile = path.join(h.workdir, 'appended.log');
    const { sessionId } = await h.emu.createSession({
      script: [{ tool: 'bash', input: { command: `echo ran >> ${JSON.stringify(logFile)}` } }],
    });
    // The first result post hangs; once the tool has run, the next heartbeat answers 412.
    h.emu.faults.add({ route: RESULT_POST, hang: true, times: 1 });
    const worker = h.worker();
    const running = worker.run();
    const deadline = Date.now() + 20_000;
    while (!(await fsp.stat(logFile).catch(() => undefined)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    h.emu.faults.add({ route: HEARTBEAT, leaseLost: true, times: 1 });
    const done = await h.emu.waitForSession(sessionId, { timeoutMs: 40_000 });
    await worker.close();
    await running;

    expect(await fsp.readFile(logFile, 'utf8')).toBe('ran\n');
    expect(done.toolResults.map((r) => r.name)).toEqual(['bash']);
    const claims = h.emu.requests.filter((r) => r.method === 'POST' && /\/ack$/.test(r.path));
    expect(claims.length).toBeGreaterThanOrEqual(2);
    expect(h.capture.lines.some((l) => /replayed; answering with the recorded result/.test(l.msg))).toBe(true);
  }, 60_000);
});
