/**
 * Pins the emulator's session threads as SDK 1.16 reads them: a `threads` step creates each child
 * thread (`session.thread_created`, `session.thread_status_running`), makes each call with the
 * thread's `session_thread_id` followed by that thread's own `requires_action` idle, runs again
 * after the result, and ends with an `end_turn` idle and (by default) a termination. Calls of
 * different threads are outstanding at the same time, so a 1.16 runner with `maxConcurrentCalls: 2`
 * runs them at once. `emu.terminateThread` ends a thread mid-call; a result for one of its calls is
 * refused. Also: the 503 `storage_not_ready` fault and the default lease TTL.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { betaTool } from '@anthropic-ai/sdk/helpers/beta/json-schema';
import { SessionToolRunner } from '@anthropic-ai/sdk/lib/tools/SessionToolRunner';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator, type SessionEvent } from '../../src/testing/index.js';
import { errorBody, expectApiError, sdkAtLeast } from './helpers.js';

let emu: Emulator;
let tmp: string;

beforeEach(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'maw-emu-threads-'));
  emu = await startEmulator({ mountRoot: join(tmp, 'mnt') });
});
afterEach(async () => {
  await emu.close();
  rmSync(tmp, { recursive: true, force: true });
});

async function until(check: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The events of one thread, as `type` or `type:stop_reason`. */
function threadTrace(events: SessionEvent[], threadId: string): string[] {
  return events
    .filter((e) => e['session_thread_id'] === threadId)
    .map((e) => {
      const reason = (e['stop_reason'] as { type?: string } | undefined)?.type;
      return reason ? `${e.type}:${reason}` : e.type;
    });
}

function toolUses(sessionId: string): SessionEvent[] {
  return emu.events(sessionId).filter((e) => e.type === 'agent.tool_use');
}

async function answer(sessionId: string, workId: string, call: SessionEvent, text: string): Promise<unknown> {
  return emu.sessionClient(workId, { maxRetries: 0 }).beta.sessions.events.send(sessionId, {
    events: [{ type: 'user.tool_result', tool_use_id: call.id, content: [{ type: 'text', text }] }],
  });
}

describe('a threads step', () => {
  it('walks each thread through created, running, its own requires_action idle, running, end_turn idle and terminated', async () => {
    const { sessionId, workId } = await emu.createSession({
      script: [
        {
          threads: [
            { threadId: 'sthr_a', agentName: 'reviewer', steps: [{ tool: 'bash', input: { command: 'true' } }] },
            { threadId: 'sthr_b', steps: [{ message: 'no tools' }], end: 'idle' },
          ],
        },
      ],
    });
    emu.startScript(sessionId);
    await until(() => toolUses(sessionId).length === 1, 'the call of thread A');
    const [call] = toolUses(sessionId);
    expect(call).toMatchObject({ name: 'bash', session_thread_id: 'sthr_a' });
    // The call is listed by its thread's idle, not by a session-level idle.
    const idle = emu.events(sessionId).find((e) => e.type === 'session.thread_status_idle' && e['session_thread_id'] === 'sthr_a');
    expect(idle).toMatchObject({ agent_name: 'reviewer', stop_reason: { type: 'requires_action', event_ids: [call!.id] } });
    expect(emu.events(sessionId).filter((e) => e.type === 'session.status_idle')).toEqual([]);
    await answer(sessionId, workId, call!, 'done');
    await until(() => emu.session(sessionId).status === 'terminated', 'the session to end');

    const events = emu.events(sessionId);
    expect(threadTrace(events, 'sthr_a')).toEqual([
      'session.thread_created',
      'session.thread_status_running',
      'agent.tool_use',
      'session.thread_status_idle:requires_action',
      'session.thread_status_running',
      'session.thread_status_idle:end_turn',
      'session.thread_status_terminated',
    ]);
    expect(threadTrace(events, 'sthr_b')).toEqual([
      'session.thread_created',
      'session.thread_status_running',
      'agent.message',
      'session.thread_status_idle:end_turn',
    ]);
    expect(events.find((e) => e.type === 'session.thread_created')).toMatchObject({ agent_name: 'reviewer', workflow_run_id: null });
    expect(emu.session(sessionId).threads).toEqual({ sthr_a: 'terminated', sthr_b: 'idle' });
    expect(emu.session(sessionId).toolResults).toEqual([expect.objectContaining({ threadId: 'sthr_a', text: 'done' })]);
  });

  it('has the calls of two threads outstanding at the same time, each thread one call at a time', async () => {
    const { sessionId, workId } = await emu.createSession({
      script: [
        {
          threads: [
            {
              threadId: 'sthr_a',
              steps: [
                { tool: 'bash', input: { n: 1 } },
                { tool: 'bash', input: { n: 2 } },
              ],
            },
            { threadId: 'sthr_b', steps: [{ tool: 'bash', input: { n: 3 } }] },
          ],
        },
        { message: 'all threads done' },
      ],
    });
    emu.startScript(sessionId);
    await until(() => toolUses(sessionId).length === 2, 'one call of each thread');
    await new Promise((r) => setTimeout(r, 50));
    // Thread A's second call waits for its first; the script's own next step waits for both threads.
    expect(toolUses(sessionId).map((e) => [e['session_thread_id'], e['input']])).toEqual([
      ['sthr_a', { n: 1 }],
      ['sthr_b', { n: 3 }],
    ]);
    const [a1, b] = toolUses(sessionId);
    await answer(sessionId, workId, b!, 'b');
    await answer(sessionId, workId, a1!, 'a1');
    await until(() => toolUses(sessionId).length === 3, 'thread A to make its second call');
    expect(emu.events(sessionId).some((e) => e.type === 'agent.message' && e['session_thread_id'] === undefined)).toBe(false);
    await answer(sessionId, workId, toolUses(sessionId)[2]!, 'a2');
    await until(() => emu.session(sessionId).status === 'terminated', 'the session to end');
    const results = emu.session(sessionId).toolResults;
    expect(results.map((r) => [r.threadId, r.text])).toEqual([
      ['sthr_b', 'b'],
      ['sthr_a', 'a1'],
      ['sthr_a', 'a2'],
    ]);
    for (const r of results) expect(r.answeredAtMs).toBeGreaterThanOrEqual(r.calledAtMs);
  });

  it('ends a thread mid-call on emu.terminateThread: its steps stop and a late result for its call is refused', async () => {
    const { sessionId, workId } = await emu.createSession({
      script: [
        {
          threads: [
            { threadId: 'sthr_a', steps: [{ tool: 'bash', input: { command: 'sleep 100' } }, { tool: 'never' }] },
            { threadId: 'sthr_b', steps: [{ sleepMs: 100 }] },
          ],
        },
      ],
    });
    emu.startScript(sessionId);
    await until(() => toolUses(sessionId).length === 1, 'the call of thread A');
    emu.terminateThread(sessionId, 'sthr_a');
    emu.terminateThread(sessionId, 'sthr_a'); // a no-op the second time
    await until(() => emu.session(sessionId).status === 'terminated', 'the session to end');
    expect(threadTrace(emu.events(sessionId), 'sthr_a').slice(-2)).toEqual([
      'session.thread_status_idle:requires_action',
      'session.thread_status_terminated',
    ]);
    expect(toolUses(sessionId).map((e) => e['name'])).toEqual(['bash']);
    expect(() => emu.terminateThread(sessionId, 'sthr_unknown')).toThrow(/has no thread sthr_unknown/);
  });

  it('refuses a result for a call of a terminated thread with 400 while the session still runs', async () => {
    const { sessionId, workId } = await emu.createSession({
      script: [{ threads: [{ threadId: 'sthr_a', steps: [{ tool: 'bash' }] }] }, { sleepMs: 60_000 }],
    });
    emu.startScript(sessionId);
    await until(() => toolUses(sessionId).length === 1, 'the call of thread A');
    emu.terminateThread(sessionId, 'sthr_a');
    const err = await expectApiError(answer(sessionId, workId, toolUses(sessionId)[0]!, 'late'), 400, 'invalid_request_error');
    expect(String(errorBody(err)['message'])).toContain('sthr_a');
    expect(emu.session(sessionId).toolResults).toEqual([]);
  });

  // SDK behaviour that changed in 1.16: `maxConcurrentCalls` runs calls of different threads at
  // once; 1.14 and 1.15 run every call one after the other (and do not know the option).
  it('lets the SDK runner run both threads at once with maxConcurrentCalls: 2 (1.16+), one after the other before', async () => {
    const spans: Array<{ thread: string; start: number; end: number }> = [];
    const slow = betaTool({
      name: 'slow',
      description: 'waits 600 ms',
      inputSchema: { type: 'object', properties: { thread: { type: 'string' } }, required: ['thread'] },
      run: async (args) => {
        const start = Date.now();
        await new Promise((r) => setTimeout(r, 600));
        spans.push({ thread: args.thread, start, end: Date.now() });
        return `slept on ${args.thread}`;
      },
    });
    const { sessionId, workId } = await emu.createSession({
      script: [
        {
          threads: [
            { threadId: 'sthr_a', steps: [{ tool: 'slow', input: { thread: 'a' } }] },
            { threadId: 'sthr_b', steps: [{ tool: 'slow', input: { thread: 'b' } }] },
          ],
        },
      ],
    });
    const runner = new SessionToolRunner(sessionId, {
      client: emu.sessionClient(workId),
      tools: [slow],
      maxIdleMs: 0,
      maxConcurrentCalls: 2,
    });
    for await (const _ of runner) {
      // drive to the end
    }
    const results = emu.session(sessionId).toolResults;
    expect(results.map((r) => r.threadId).sort()).toEqual(['sthr_a', 'sthr_b']);
    const [first, second] = [...spans].sort((x, y) => x.start - y.start);
    if (sdkAtLeast('1.16.0')) {
      expect(second!.start).toBeLessThan(first!.end); // the runs overlap
    } else {
      expect(second!.start).toBeGreaterThanOrEqual(first!.end);
    }
  });
});

describe('the storage_not_ready fault', () => {
  it('answers 503 with details.error_code storage_not_ready, which SDK 1.16 turns into its StorageNotReadyError', async () => {
    const store = await emu.createMemoryStore({ name: 'notes' });
    const rule = emu.faults.add({ route: /^GET \/v1\/memory_stores\//, storageNotReady: true, shouldRetry: false, times: 1 });
    const err = await expectApiError(emu.client({ maxRetries: 0 }).beta.memoryStores.retrieve(store.id), 503, 'api_error');
    expect(errorBody(err)).toMatchObject({ details: { error_code: 'storage_not_ready' }, message: expect.stringContaining('storage') });
    expect(err.headers?.get('x-should-retry')).toBe('false');
    if (sdkAtLeast('1.16.0')) {
      // Named by its shape, as the library recognises errors: status and error code.
      expect((err as unknown as { errorCode: unknown }).errorCode).toBe('storage_not_ready');
      expect(err.constructor.name).toBe('StorageNotReadyError');
    }
    expect(rule.hits).toBe(1);
    expect((await emu.client().beta.memoryStores.retrieve(store.id)).id).toBe(store.id);
  });

  it('puts any errorCode given with a status into error.details', async () => {
    emu.faults.add({ route: /^GET \/v1\/sessions$/, status: 409, errorCode: 'storage_changed_concurrently', times: 1 });
    const err = await expectApiError(emu.client({ maxRetries: 0 }).beta.sessions.list(), 409, 'conflict_error');
    expect(errorBody(err)['details']).toEqual({ error_code: 'storage_changed_concurrently' });
  });
});

describe('the default lease', () => {
  it('lasts 300 s, the TTL SDK 1.16 assumes before the first heartbeat answers', async () => {
    const { workId } = await emu.createSession();
    const env = emu.client({ apiKey: emu.environmentKey });
    await env.beta.environments.work.poll(emu.environmentId);
    const beat = await emu
      .sessionClient(workId)
      .beta.environments.work.heartbeat(workId, { environment_id: emu.environmentId, expected_last_heartbeat: 'NO_HEARTBEAT' });
    expect(beat).toMatchObject({ ttl_seconds: 300, lease_extended: true, state: 'active' });
  });
});
