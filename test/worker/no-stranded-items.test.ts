// Pins "no stranded items": every acknowledged item ends stopped — a healthcheck item and the item
// of an already-terminated session are stopped without running anything (no event stream opened);
// a tools factory that throws and a listener that throws fail (or not) only that item, which is
// still stopped; the worker goes on serving.
import { betaAgentToolset20260401 } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { harness, stopRequests, waitFor, type Harness } from './helpers.js';

describe('every acknowledged item ends stopped', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('stops a healthcheck item and the item of a terminated session without running anything', async () => {
    const { emu } = h;
    const hc = emu.enqueue({ type: 'healthcheck' });
    const dead = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo never' } }], end: 'idle' });
    emu.archiveSession(dead.sessionId);
    const worker = h.worker();
    const stopped: string[] = [];
    worker.on('workStopped', (e) => stopped.push(e.workId));
    const running = worker.run();
    await waitFor(() => stopped.length === 2, 10_000, 'both items to be stopped');
    await worker.close();
    await running;

    expect(stopped.sort()).toEqual([hc, dead.workId].sort());
    expect(emu.workItem(hc).state).toBe('stopped');
    expect(emu.workItem(dead.workId).state).toBe('stopped');
    expect(emu.session(dead.sessionId).toolResults).toEqual([]);
    expect(emu.requests.some((r) => r.path.endsWith('/events/stream'))).toBe(false);
    expect(worker.metrics()).toMatchObject({ itemsClaimed: 2, itemsFailed: 0 });
  });

  it('fails only the item whose tools factory throws, stops it, and serves the next one', async () => {
    const { emu } = h;
    const first = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo one' } }], end: 'idle' });
    const second = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo two' } }] });
    let calls = 0;
    const worker = h.worker({
      tools: (ctx) => {
        calls++;
        if (calls === 1) throw new Error('tool set-up exploded');
        return betaAgentToolset20260401(ctx);
      },
    });
    const failed: Error[] = [];
    worker.on('workFailed', (e) => failed.push(e.error));
    // A throwing listener must not break the worker either.
    worker.on('workClaimed', () => {
      throw new Error('listener bug');
    });
    const running = worker.run();
    await waitFor(() => emu.workItem(second.workId).stopped, 10_000, 'the second item to be stopped');
    await worker.close();
    await running;

    expect(failed.map((e) => e.message)).toEqual(['tool set-up exploded']);
    expect(stopRequests(h, first.workId).map((r) => r.body)).toEqual([{ force: true }]);
    expect(emu.workItem(first.workId).state).toBe('stopped');
    expect(h.capture.lines.filter((l) => l.msg === 'an event listener threw; ignored')).toHaveLength(2);
    emu.archiveSession(first.sessionId);
  });
});
