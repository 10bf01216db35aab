/**
 * A connection that drops part-way through a 2xx answer (the emulator's `cutBody`: the request
 * applied, its status, headers and half its body sent, then the socket destroyed), on each call a
 * worker makes. From SDK 1.17 the client sends such a request again within `maxRetries`; before, the
 * call failed. Either way: nothing is done twice that must not be (the lease survives its beat, the
 * item is stopped once, a memory is created once), and nothing is lost (every tool call answered,
 * every edit in the store).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FaultRule } from '../../src/testing/index.js';
import { harness, type Harness } from './helpers.js';

const HEARTBEAT = /^POST \/v1\/environments\/[^/]+\/work\/[^/]+\/heartbeat$/;
const ACK = /^POST \/v1\/environments\/[^/]+\/work\/[^/]+\/ack$/;
const STOP = /^POST \/v1\/environments\/[^/]+\/work\/[^/]+\/stop$/;
const MEMORY_CREATE = /^POST \/v1\/memory_stores\/[^/]+\/memories$/;
const MEMORY_UPDATE = /^POST \/v1\/memory_stores\/[^/]+\/memories\/[^/]+$/;
const LISTING = /^GET \/v1\/memory_stores\/[^/]+\/memories$/;
const EVENT_POST = /^POST \/v1\/sessions\/[^/]+\/events$/;

let h: Harness;
beforeEach(async () => {
  h = await harness({ leaseTtlSeconds: 4 });
});
afterEach(async () => {
  await h.cleanup();
});

const requestsMatching = (re: RegExp) => h.emu.requests.filter((r) => re.test(`${r.method} ${r.path}`));

/** One session that reads, creates and edits memories with bash, across a few heartbeats. */
async function runSession(fault: FaultRule) {
  const store = await h.emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'a', '/b.md': 'b' } });
  const mount = `${h.mountRoot}/notes`;
  const { sessionId, workId } = await h.emu.createSession({
    resources: [{ memoryStoreId: store.id }],
    script: [
      { tool: 'bash', input: { command: `cat ${mount}/a.md` } },
      { tool: 'bash', input: { command: `echo new > ${mount}/c.md; echo edited > ${mount}/b.md` } },
      { sleepMs: 4_500 },
      { tool: 'bash', input: { command: `echo done` } },
    ],
  });
  const added = h.emu.faults.add({ ...fault, times: 1 });
  const worker = h.worker();
  const outcomes: string[] = [];
  worker.on('sessionEnded', (e: { outcome?: { status?: string } }) => outcomes.push(String(e.outcome?.status ?? 'ended')));
  const running = worker.run();
  try {
    const done = await h.emu.waitForSession(sessionId, { timeoutMs: 45_000 });
    return { store, workId, done, added };
  } finally {
    await worker.close();
    await running;
  }
}

describe('a 2xx answer cut part-way', () => {
  it.each([
    { call: 'a heartbeat', fault: { route: HEARTBEAT, cutBody: true, skip: 1 } },
    { call: 'the ack', fault: { route: ACK, cutBody: true } },
    { call: 'the stop', fault: { route: STOP, cutBody: true } },
    { call: 'a memory create', fault: { route: MEMORY_CREATE, cutBody: true } },
    { call: 'a memory update', fault: { route: MEMORY_UPDATE, cutBody: true } },
    { call: 'a listing page', fault: { route: LISTING, cutBody: true } },
    { call: 'a tool result post', fault: { route: EVENT_POST, cutBody: true } },
  ])(
    'on $call: the session ends served, its edits kept once, the item stopped once',
    async ({ fault }) => {
      const { store, workId, done, added } = await runSession(fault);
      expect(added.hits).toBe(1);
      // Nothing lost: every call answered once per tool use, every edit in the store.
      expect(new Set(done.toolResults.map((r) => r.toolUseId)).size).toBe(3);
      expect([...new Set(done.toolResults.map((r) => r.text.trim()))]).toEqual(['a', '(no output)', 'done']);
      expect(h.emu.memories(store.id)).toEqual({ '/a.md': 'a', '/b.md': 'edited\n', '/c.md': 'new\n' });
      // Nothing done twice that must not be: one create of /c.md, one update of /b.md in the store's history.
      const history = h.emu.memoryHistory(store.id).filter((w) => w.op !== 'delete');
      expect(history.filter((w) => w.path === '/c.md' && w.op === 'create')).toHaveLength(1);
      expect(history.filter((w) => w.path === '/b.md' && w.op === 'update')).toHaveLength(1);
      // The lease held to the end and the item was stopped by this worker (a lost lease sends no stop).
      // A beat whose answer was cut reached the server: the next one, echoing the value before it,
      // gets a 412, and the lease goes on from the server's last_heartbeat (one 412, then beats answered).
      const beats = requestsMatching(HEARTBEAT).map((r) => r.status);
      const refused = beats.indexOf(412);
      if (refused >= 0) {
        expect(beats.filter((s) => s === 412)).toHaveLength(1);
        expect(beats.slice(refused + 1)).toContain(200);
        expect(h.capture.lines.some((l) => l.msg.includes("continuing the lease from the server's last_heartbeat"))).toBe(true);
      }
      expect(h.capture.lines.filter((l) => l.msg.includes('lease lost'))).toEqual([]);
      expect(h.emu.workItem(workId).state).toBe('stopped');
      expect(requestsMatching(STOP).filter((r) => r.status >= 400 && r.status !== 409)).toEqual([]);
    },
    60_000,
  );
});
