// Pins how the worker sees a session go idle: `endsTurn` says which events end the agent's turn
// (an idle for any reason but requires_action), and the tapped client hands every event of a
// session's stream to the observer before the reader gets it, while everything else on the client
// (history, retrieve, sends) is the client's own. Run against the emulator over real HTTP with the
// installed SDK's client.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { endsTurn, tappingSessionEvents } from '../../src/worker/session-events-tap.js';

describe('endsTurn', () => {
  const rows: Array<{ description: string; event: unknown; expected: boolean }> = [
    { description: 'an end_turn idle', event: { type: 'session.status_idle', stop_reason: { type: 'end_turn' } }, expected: true },
    {
      description: 'a retries_exhausted idle',
      event: { type: 'session.status_idle', stop_reason: { type: 'retries_exhausted' } },
      expected: true,
    },
    { description: 'an idle without a stop reason', event: { type: 'session.status_idle' }, expected: true },
    {
      description: 'a requires_action idle (its calls run next)',
      event: { type: 'session.status_idle', stop_reason: { type: 'requires_action', event_ids: ['sevt_1'] } },
      expected: false,
    },
    { description: "a thread's idle", event: { type: 'session.thread_status_idle', stop_reason: { type: 'end_turn' } }, expected: false },
    { description: 'running', event: { type: 'session.status_running' }, expected: false },
    { description: 'a tool call', event: { type: 'agent.tool_use', id: 'x' }, expected: false },
    { description: 'not an object', event: 'session.status_idle', expected: false },
    { description: 'null', event: null, expected: false },
  ];
  it.each(rows)('$description → $expected', ({ event, expected }) => {
    expect(endsTurn(event)).toBe(expected);
  });
});

describe('a client tapping the session events', () => {
  let emu: Emulator;
  beforeEach(async () => {
    emu = await startEmulator({ mountRoot: '/nonexistent-mount-root' });
  });
  afterEach(async () => {
    await emu.close();
  });

  it("hands each streamed event to the observer before the reader, and leaves the client's other calls as they are", async () => {
    const { sessionId } = await emu.createSession({ end: 'idle' });
    const seen: string[] = [];
    const client = tappingSessionEvents(emu.sessionClient(sessionId), (ev) => {
      seen.push((ev as { type: string }).type);
      throw new Error('an observer failure the reader never sees');
    });
    const read: string[] = [];
    const stream = await client.beta.sessions.events.stream(sessionId);
    emu.startScript(sessionId);
    for await (const ev of stream) {
      expect(seen.at(-1)).toBe(ev.type);
      read.push(ev.type);
      if (ev.type === 'session.status_idle') break;
    }
    expect(read).toEqual(['session.status_running', 'session.status_idle']);
    expect(seen).toEqual(read);
    // The rest of the client is untouched.
    expect((await client.beta.sessions.retrieve(sessionId)).id).toBe(sessionId);
    const history: string[] = [];
    for await (const ev of client.beta.sessions.events.list(sessionId)) history.push(ev.type);
    expect(history).toEqual(['session.status_running', 'session.status_idle']);
    expect(client.baseURL).toBe(emu.baseURL);
    expect(seen).toEqual(read);
  });
});
