/**
 * Pins the emulator's sessions and events: the session object (resources with derived or given
 * mount paths, `agent.skills`), archive → terminated, event history with ids in order and cursor
 * pagination, SSE framing (`event:` + `data:` frames, keep-alive comments, several streams, an
 * immediate termination frame on a terminated session), and the scripted agent driven by the
 * SDK's own SessionToolRunner: every scripted call dispatched once, one result each — also when a
 * result post fails and the stream drops.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { betaTool } from '@anthropic-ai/sdk/helpers/beta/json-schema';
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { SessionToolRunner } from '@anthropic-ai/sdk/lib/tools/SessionToolRunner';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { expectApiError, sdkAtLeast } from './helpers.js';

let emu: Emulator;
let tmp: string;

beforeEach(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'maw-emu-sessions-'));
  emu = await startEmulator({ mountRoot: join(tmp, 'mnt'), keepAliveMs: 50 });
});
afterEach(async () => {
  await emu.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** A tool that counts its calls per input text. */
function echoTool(calls: string[]): BetaRunnableTool {
  return betaTool({
    name: 'echo',
    description: 'echo the text',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    run: (args) => {
      calls.push(args.text);
      return `echo: ${args.text}`;
    },
  });
}

/** Read an SSE response until `until` returns true on the text so far (or `timeoutMs`). */
async function readStream(res: Response, until: (text: string) => boolean, timeoutMs = 2_000): Promise<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const deadline = Date.now() + timeoutMs;
  while (!until(text) && Date.now() < deadline) {
    const chunk = await Promise.race([reader.read(), new Promise<null>((r) => setTimeout(() => r(null), deadline - Date.now()))]);
    if (chunk === null || chunk.done) break;
    text += decoder.decode(chunk.value, { stream: true });
  }
  await reader.cancel().catch(() => undefined);
  return text;
}

describe('the session object', () => {
  it('derives mount paths from store names, honours a given or null mountPath, and always has agent.skills', async () => {
    const a = await emu.createMemoryStore({ name: 'User Preferences!! 2024' });
    const b = await emu.createMemoryStore({ name: 'Other' });
    const c = await emu.createMemoryStore({ name: 'Third' });
    const { sessionId } = await emu.createSession({
      resources: [
        { memoryStoreId: a.id },
        { memoryStoreId: b.id, access: 'read_only', mountPath: '/somewhere/else' },
        { memoryStoreId: c.id, mountPath: null },
      ],
    });
    const session = await emu.client().beta.sessions.retrieve(sessionId);
    expect(session).toMatchObject({ id: sessionId, type: 'session', status: 'idle', environment_id: emu.environmentId, archived_at: null });
    expect(session.agent.skills).toEqual([]);
    expect(session.resources).toEqual([
      expect.objectContaining({
        type: 'memory_store',
        memory_store_id: a.id,
        name: 'User Preferences!! 2024',
        access: 'read_write',
        mount_path: join(tmp, 'mnt', 'user-preferences-2024'),
      }),
      expect.objectContaining({ memory_store_id: b.id, access: 'read_only', mount_path: '/somewhere/else' }),
      expect.objectContaining({ memory_store_id: c.id, mount_path: null }),
    ]);
  });

  it('is created over HTTP too, queues a work item and emits sessionCreated', async () => {
    const store = await emu.createMemoryStore({ name: 'Notes' });
    const seen: Array<{ sessionId: string; workId: string | null }> = [];
    emu.on('sessionCreated', (e) => seen.push(e));
    const session = await emu.client().beta.sessions.create({
      agent: 'agent_123',
      environment_id: emu.environmentId,
      resources: [{ type: 'memory_store', memory_store_id: store.id, access: 'read_only' }],
    });
    expect(session.resources[0]).toMatchObject({ memory_store_id: store.id, access: 'read_only', mount_path: join(tmp, 'mnt', 'notes') });
    expect(seen).toEqual([{ sessionId: session.id, workId: expect.stringMatching(/^work_/), environmentId: emu.environmentId }]);
    expect(emu.workItem(session.id).state).toBe('queued');
  });

  it('refuses more than 8 stores and unknown stores with 400', async () => {
    const stores = await Promise.all(Array.from({ length: 9 }, (_, i) => emu.createMemoryStore({ name: `s${i}` })));
    const client = emu.client({ maxRetries: 0 });
    await expectApiError(
      client.beta.sessions.create({
        agent: 'agent_1',
        environment_id: emu.environmentId,
        resources: stores.map((s) => ({ type: 'memory_store' as const, memory_store_id: s.id })),
      }),
      400,
      'invalid_request_error',
    );
    await expectApiError(
      client.beta.sessions.create({
        agent: 'agent_1',
        environment_id: emu.environmentId,
        resources: [{ type: 'memory_store', memory_store_id: 'memstore_nope' }],
      }),
      400,
    );
  });

  it('archive sets archived_at and terminates the session without an event in its history (only the status shows it)', async () => {
    const { sessionId } = await emu.createSession();
    emu.emitEvent(sessionId, { type: 'agent.message', content: [{ type: 'text', text: 'before' }] });
    const terminated: string[] = [];
    emu.on('sessionTerminated', ({ sessionId: id }) => terminated.push(id));
    const archived = await emu.client().beta.sessions.archive(sessionId);
    expect(archived.status).toBe('terminated');
    expect(archived.archived_at).not.toBeNull();
    expect((await emu.client().beta.sessions.retrieve(sessionId)).status).toBe('terminated');
    expect(emu.events(sessionId).map((e) => e.type)).toEqual(['agent.message']);
    expect(terminated).toEqual([sessionId]);
  });

  it('ends the open event streams cleanly on archive, with no frame', async () => {
    const { sessionId } = await emu.createSession();
    const res = await fetch(`${emu.baseURL}/v1/sessions/${sessionId}/events/stream`, {
      headers: { authorization: `Bearer ${emu.apiKey}` },
    });
    await new Promise((r) => setTimeout(r, 50));
    emu.archiveSession(sessionId);
    const text = await res.text(); // resolves only once the server ended the body
    expect(text).not.toContain('event:');
    expect(emu.session(sessionId).openStreams).toBe(0);
  });
});

describe('events', () => {
  it('lists the history in order with ids and processed_at, page by page', async () => {
    const { sessionId } = await emu.createSession();
    for (let i = 0; i < 5; i++) emu.emitEvent(sessionId, { type: 'agent.message', content: [{ type: 'text', text: `m${i}` }] });
    const client = emu.client();
    const texts: string[] = [];
    for await (const ev of client.beta.sessions.events.list(sessionId, { limit: 2 })) {
      expect(ev.id).toMatch(/^sevt_/);
      expect(typeof ev.processed_at).toBe('string');
      if (ev.type === 'agent.message') texts.push(ev.content[0]!.type === 'text' ? ev.content[0]!.text : '');
    }
    expect(texts).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
    expect(emu.requests.filter((r) => r.route === 'GET /v1/sessions/:id/events')).toHaveLength(3);
    await expectApiError(client.beta.sessions.events.list(sessionId, { limit: 1001 }), 400);
  });

  it('appends posted user events with new ids and refuses events to a terminated session', async () => {
    const { sessionId } = await emu.createSession();
    const client = emu.client({ maxRetries: 0 });
    await client.beta.sessions.events.send(sessionId, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'hi' }] }] });
    const [ev] = emu.events(sessionId);
    expect(ev).toMatchObject({ type: 'user.message', id: expect.stringMatching(/^sevt_/) });
    emu.archiveSession(sessionId);
    await expectApiError(
      client.beta.sessions.events.send(sessionId, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'late' }] }] }),
      400,
    );
  });

  it('streams every event as an `event:` + `data:` frame to several streams at once, with keep-alive comments', async () => {
    const { sessionId } = await emu.createSession();
    const headers = { authorization: `Bearer ${emu.apiKey}`, accept: 'application/json' };
    const [s1, s2] = await Promise.all([
      fetch(`${emu.baseURL}/v1/sessions/${sessionId}/events/stream`, { headers }),
      fetch(`${emu.baseURL}/v1/sessions/${sessionId}/events/stream`, { headers }),
    ]);
    expect(s1.status).toBe(200);
    expect(s1.headers.get('content-type')).toContain('text/event-stream');
    const ev = emu.emitEvent(sessionId, { type: 'agent.message', content: [{ type: 'text', text: 'hello' }] });
    const [t1, t2] = await Promise.all([
      readStream(s1, (t) => t.includes('keep-alive') && t.includes('hello')),
      readStream(s2, (t) => t.includes('hello')),
    ]);
    for (const text of [t1, t2]) expect(text).toContain(`event: agent.message\ndata: ${JSON.stringify(ev)}\n\n`);
    expect(t1).toContain(': keep-alive\n\n');
  });

  it('sends session.status_terminated at once on a stream opened after the session was archived, with an id', async () => {
    const { sessionId } = await emu.createSession();
    emu.archiveSession(sessionId);
    const res = await fetch(`${emu.baseURL}/v1/sessions/${sessionId}/events/stream`, {
      headers: { authorization: `Bearer ${emu.apiKey}` },
    });
    const text = await readStream(res, (t) => t.includes('terminated'));
    expect(text).toMatch(/^event: session\.status_terminated\ndata: /);
    const data = JSON.parse(text.split('data: ')[1]!.split('\n')[0]!) as { id: string; processed_at: string };
    expect(data.id).toMatch(/^sevt_/);
    expect(typeof data.processed_at).toBe('string');
  });
});

describe('the scripted agent with the SDK SessionToolRunner', () => {
  it('dispatches each scripted call exactly once, records one result each, and ends the runner on termination', async () => {
    const calls: string[] = [];
    const yielded: string[] = [];
    const { sessionId, workId } = await emu.createSession({
      script: [
        { tool: 'echo', input: { text: 'one' } },
        { console: () => calls.push('console') },
        { message: 'thinking' },
        { tool: 'echo', input: { text: 'two' } },
        { tool: 'missing_tool', input: {} },
      ],
      end: 'terminate',
    });
    const runner = new SessionToolRunner(sessionId, { client: emu.sessionClient(workId), tools: [echoTool(calls)], maxIdleMs: 0 });
    const iterate = (async () => {
      for await (const call of runner) yielded.push(`${call.name}:${call.posted}`);
    })();
    // The unknown tool is left to its owner: answer it as another client would.
    const deadline = Date.now() + 5_000;
    let unknownId: string | undefined;
    while (!unknownId && Date.now() < deadline) {
      unknownId = emu.events(sessionId).find((e) => e.type === 'agent.tool_use' && e['name'] === 'missing_tool')?.id;
      await new Promise((r) => setTimeout(r, 20));
    }
    await emu.client().beta.sessions.events.send(sessionId, {
      events: [{ type: 'user.tool_result', tool_use_id: unknownId!, content: [{ type: 'text', text: 'by the app' }], is_error: true }],
    });
    const done = await emu.waitForSession(sessionId, { timeoutMs: 1_500 }).catch((e: Error) => e);
    await iterate;
    expect(calls).toEqual(['one', 'console', 'two']);
    // In the order the runner finished them: the unknown tool may be yielded before the second echo.
    expect([...yielded].sort()).toEqual(['echo:true', 'echo:true', 'missing_tool:false']);
    // Nobody stopped the work item, so waitForSession keeps waiting and names it.
    expect(String(done)).toContain(`work item ${workId} is queued, waiting for stopped`);
    const session = emu.session(sessionId);
    expect(session.status).toBe('terminated');
    expect(session.toolResults.map((r) => [r.name, r.isError, r.text])).toEqual([
      ['echo', false, 'echo: one'],
      ['echo', false, 'echo: two'],
      ['missing_tool', true, 'by the app'],
    ]);
    const types = emu.events(sessionId).map((e) => e.type);
    expect(types.at(-2)).toBe('session.status_idle');
    expect(types.at(-1)).toBe('session.status_terminated');
  });

  it('walks the status lifecycle: idle, running, idle awaiting the result, running, idle at end_turn, terminated', async () => {
    const { sessionId, workId } = await emu.createSession({ script: [{ tool: 'echo', input: { text: 'x' } }] });
    expect(emu.session(sessionId).status).toBe('idle');
    const statusDuringCall: string[] = [];
    const tool = echoTool([]);
    const runner = new SessionToolRunner(sessionId, {
      client: emu.sessionClient(workId),
      tools: [
        { ...tool, run: (args, ctx) => (statusDuringCall.push(emu.session(sessionId).status), tool.run(args, ctx)) } as BetaRunnableTool,
      ],
      maxIdleMs: 0,
    });
    for await (const _ of runner) {
      // drive to the end
    }
    expect(statusDuringCall).toEqual(['idle']);
    expect(emu.session(sessionId).status).toBe('terminated');
    const lifecycle = emu
      .events(sessionId)
      .filter((e) => e.type.startsWith('session.status_') || e.type === 'agent.tool_use' || e.type === 'user.tool_result')
      .map((e) => (e.type === 'session.status_idle' ? `${e.type}:${(e['stop_reason'] as { type: string }).type}` : e.type));
    expect(lifecycle).toEqual([
      'session.status_running',
      'agent.tool_use',
      'session.status_idle:requires_action',
      'user.tool_result',
      'session.status_running',
      'session.status_idle:end_turn',
      'session.status_terminated',
    ]);
  });

  it('keeps exactly one run per call when a result post fails once and the stream drops right after', async () => {
    const { sessionId, workId } = await emu.createSession({
      script: [
        { tool: 'echo', input: { text: 'a' } },
        { tool: 'echo', input: { text: 'b' } },
      ],
    });
    emu.faults.add({ route: /^POST \/v1\/sessions\/[^/]+\/events$/, status: 503, shouldRetry: false, times: 1, dropStream: true });
    const calls: string[] = [];
    const runner = new SessionToolRunner(sessionId, { client: emu.sessionClient(workId), tools: [echoTool(calls)], maxIdleMs: 0 });
    for await (const _ of runner) {
      // drive to the end
    }
    expect(calls).toEqual(['a', 'b']);
    expect(emu.session(sessionId).toolResults.map((r) => r.text)).toEqual(['echo: a', 'echo: b']);
    const streams = emu.requests.filter((r) => r.route === 'GET /v1/sessions/:id/events/stream');
    expect(streams.length).toBeGreaterThanOrEqual(2);
  });

  // SDK behaviour that changed in 1.16: a refused result is answered with an error result in its
  // place; 1.14 and 1.15 post nothing, and after a stream drop they run the call again (what
  // at-most-once wrappers guard).
  it('after a refused result post and a stream drop: one error result (SDK 1.16+) or a second run of the call (1.14, 1.15)', async () => {
    const { sessionId, workId } = await emu.createSession({ script: [{ tool: 'echo', input: { text: 'once?' } }] });
    emu.faults.add({ route: /^POST \/v1\/sessions\/[^/]+\/events$/, status: 400, times: 1, dropStream: true });
    const calls: string[] = [];
    const runner = new SessionToolRunner(sessionId, { client: emu.sessionClient(workId), tools: [echoTool(calls)], maxIdleMs: 0 });
    for await (const _ of runner) {
      // drive to the end
    }
    const results = emu.session(sessionId).toolResults;
    expect(results).toHaveLength(1);
    if (sdkAtLeast('1.16.0')) {
      expect(calls).toEqual(['once?']);
      expect(results[0]).toMatchObject({ isError: true, text: expect.stringContaining('refused the result') });
    } else {
      expect(calls).toEqual(['once?', 'once?']);
      expect(results[0]).toMatchObject({ isError: false, text: 'echo: once?' });
    }
  });

  it('with end { idleMs } stays idle (end_turn) that long before terminating', async () => {
    const { sessionId } = await emu.createSession({ script: [], end: { idleMs: 300 } });
    emu.startScript(sessionId);
    await new Promise((r) => setTimeout(r, 100));
    expect(emu.session(sessionId).status).toBe('idle');
    expect(emu.events(sessionId).at(-1)).toMatchObject({ type: 'session.status_idle', stop_reason: { type: 'end_turn' } });
    await new Promise((r) => setTimeout(r, 400));
    expect(emu.session(sessionId).status).toBe('terminated');
  });

  it('surfaces a failing console step from waitForSession', async () => {
    const { sessionId } = await emu.createSession({
      script: [
        {
          console: () => {
            throw new Error('boom');
          },
        },
      ],
    });
    emu.startScript(sessionId);
    await expect(emu.waitForSession(sessionId, { timeoutMs: 2_000 })).rejects.toThrow(/step 1\/1 \(console\).*boom/);
  });
});
