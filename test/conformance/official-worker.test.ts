/**
 * Conformance: the official `EnvironmentWorker` of `@anthropic-ai/sdk` runs, unchanged, against
 * the emulator. One session with two stores (one read-only) and a script that reads a memory,
 * writes a new one, edits one, tries to write into the read-only store, with a Console edit in
 * between. This pins that the emulator speaks the wire protocol the SDK expects: work queue,
 * lease, sessions, SSE events, memory listing/writes, and the credential rules. Then a two-thread
 * session with `maxConcurrentCalls: 2` (the threads' calls overlap in time on SDK 1.16+), and a
 * graceful stop that the worker reads from a heartbeat answering `lease_extended: false`.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { EnvironmentWorker } from '@anthropic-ai/sdk/lib/environments/worker';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { sdkAtLeast } from '../testing/helpers.js';

const MARKER = '.anthropic-memory-store';

async function waitFor(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the official SDK EnvironmentWorker against the emulator', () => {
  let tmp: string;
  let emu: Emulator;

  beforeEach(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'maw-conformance-'));
    mkdirSync(join(tmp, 'mnt'));
    mkdirSync(join(tmp, 'work'));
    emu = await startEmulator({ mountRoot: join(tmp, 'mnt'), leaseTtlSeconds: 4 });
  });

  afterEach(async () => {
    await emu.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('mounts both stores, syncs the agent edits and the Console edit, refuses the read-only write, and cleans up', async () => {
    const prefs = await emu.createMemoryStore({
      name: 'User Preferences',
      memories: { '/tone.md': 'brief', '/notes/todo.md': 'buy milk\n' },
    });
    const handbook = await emu.createMemoryStore({ name: 'Team Handbook', memories: { '/rules.md': 'be kind' } });
    const prefsDir = join(tmp, 'mnt', 'user-preferences');
    const handbookDir = join(tmp, 'mnt', 'team-handbook');
    const seenWhileRunning: Record<string, string | null> = {};
    const read = (p: string): string | null => (existsSync(p) ? readFileSync(p, 'utf8') : null);

    const { sessionId, workId } = await emu.createSession({
      resources: [
        { memoryStoreId: prefs.id, access: 'read_write' },
        { memoryStoreId: handbook.id, access: 'read_only' },
      ],
      script: [
        {
          console: () => {
            seenWhileRunning['prefsMarker'] = read(join(prefsDir, MARKER));
            seenWhileRunning['handbookMarker'] = read(join(handbookDir, MARKER));
            seenWhileRunning['tone'] = read(join(prefsDir, 'tone.md'));
            seenWhileRunning['rules'] = read(join(handbookDir, 'rules.md'));
          },
        },
        { tool: 'read', input: { file_path: join(prefsDir, 'tone.md') } },
        { tool: 'write', input: { file_path: join(prefsDir, 'ideas/new.md'), content: 'a fresh memory' } },
        { tool: 'edit', input: { file_path: join(prefsDir, 'notes/todo.md'), old_string: 'milk', new_string: 'oat milk' } },
        { tool: 'write', input: { file_path: join(handbookDir, 'rules.md'), content: 'no rules' } },
        { console: (e) => e.putMemory(prefs.id, '/tone.md', 'verbose') },
        // Past the 5 s sync interval, so the next tool call triggers a sync.
        { sleepMs: 5_200 },
        { tool: 'read', input: { file_path: join(prefsDir, 'notes/todo.md') } },
        {
          console: async () => {
            await waitFor(() => read(join(prefsDir, 'tone.md')) === 'verbose', 10_000, 'the Console edit to reach the folder');
            seenWhileRunning['toneAfterConsoleEdit'] = read(join(prefsDir, 'tone.md'));
          },
        },
      ],
    });

    const client = new Anthropic({ apiKey: 'not-used-by-the-worker', baseURL: emu.baseURL, logLevel: 'off' });
    const worker = new EnvironmentWorker({
      client,
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      workdir: join(tmp, 'work'),
      memorySyncIntervalMs: 5_000,
    });
    const stop = new AbortController();
    const started = Date.now();
    const running = worker.run(stop.signal);
    let done;
    try {
      done = await emu.waitForSession(sessionId, { timeoutMs: 40_000 });
    } finally {
      stop.abort();
      await running.catch(() => undefined);
    }
    const elapsedMs = Date.now() - started;

    // Both folders appeared at their mount paths with a valid marker while the session ran.
    expect(seenWhileRunning['prefsMarker']).toBe(`version 1\n${prefs.id}`);
    expect(seenWhileRunning['handbookMarker']).toBe(`version 1\n${handbook.id}`);
    expect(seenWhileRunning['tone']).toBe('brief');
    expect(seenWhileRunning['rules']).toBe('be kind');
    expect(seenWhileRunning['toneAfterConsoleEdit']).toBe('verbose');

    // Every scripted call ran exactly once; the read-only write came back as a tool error.
    expect(done.status).toBe('terminated');
    expect(done.workStopped).toBe(true);
    expect(done.toolResults.map((r) => [r.name, r.isError])).toEqual([
      ['read', false],
      ['write', false],
      ['edit', false],
      ['write', true],
      ['read', false],
    ]);
    expect(done.toolResults[0]!.text).toContain('brief');
    expect(done.toolResults[3]!.text).toContain('read-only');
    expect(done.toolResults[4]!.text).toContain('oat milk');

    // The new and the edited memory reached the store; the Console edit survived.
    expect(emu.memories(prefs.id)).toEqual({
      '/ideas/new.md': 'a fresh memory',
      '/notes/todo.md': 'buy oat milk\n',
      '/tone.md': 'verbose',
    });
    const newMemory = emu.memory(prefs.id, '/ideas/new.md')!;
    expect(newMemory.content_sha256).toBe(createHash('sha256').update('a fresh memory').digest('hex'));

    // Nothing was uploaded from the read-only store.
    expect(emu.memories(handbook.id)).toEqual({ '/rules.md': 'be kind' });
    const writesToHandbook = emu.requests.filter(
      (r) => r.path.startsWith(`/v1/memory_stores/${handbook.id}/memories`) && r.method !== 'GET',
    );
    expect(writesToHandbook).toEqual([]);

    // The edit went up as a conditional update, the new file as a create.
    const updates = emu.requests.filter((r) => r.route === 'POST /v1/memory_stores/:id/memories/:memoryId' && r.status === 200);
    expect(updates.map((r) => r.body)).toContainEqual({
      content: 'buy oat milk\n',
      precondition: { type: 'content_sha256', content_sha256: createHash('sha256').update('buy milk\n').digest('hex') },
    });
    const creates = emu.requests.filter((r) => r.route === 'POST /v1/memory_stores/:id/memories' && r.status === 200);
    expect(creates.map((r) => r.body)).toContainEqual({ path: '/ideas/new.md', content: 'a fresh memory' });

    // The folders are gone and the item was force-stopped with the item credential.
    expect(existsSync(prefsDir)).toBe(false);
    expect(existsSync(handbookDir)).toBe(false);
    expect(emu.workItem(workId).state).toBe('stopped');
    const stops = emu.requests.filter((r) => r.route === 'POST /v1/environments/:id/work/:workId/stop');
    expect(stops.map((r) => [r.credential, r.body])).toEqual([['sessions_token', { force: true }]]);

    // The memory endpoints only ever saw the sessions token; polls only the environment key.
    const memoryCreds = new Set(emu.requests.filter((r) => r.path.startsWith('/v1/memory_stores')).map((r) => r.credential));
    expect(memoryCreds).toEqual(new Set(['sessions_token']));
    const pollCreds = new Set(emu.requests.filter((r) => r.route.endsWith('/work/poll')).map((r) => r.credential));
    expect(pollCreds).toEqual(new Set(['environment_key']));
    expect(elapsedMs).toBeLessThan(30_000);
    console.log(
      `conformance session finished in ${elapsedMs} ms with ${emu.requests.length} requests:\n` +
        emu.requests.map((r) => `  ${r.route} ${r.status} ${r.credential}`).join('\n'),
    );
  });

  // SDK behaviour that changed in 1.16: the official worker takes `maxConcurrentCalls` and runs
  // calls of different session threads at once; 1.14 and 1.15 run them one after the other.
  it('runs the calls of two session threads at once with maxConcurrentCalls: 2', async () => {
    const stamp = (name: string): string => `echo ${name} start $(date +%s%3N); sleep 2; echo ${name} end $(date +%s%3N)`;
    const { sessionId } = await emu.createSession({
      script: [
        {
          threads: [
            { threadId: 'sthr_conformance_a', agentName: 'left', steps: [{ tool: 'bash', input: { command: stamp('a') } }] },
            { threadId: 'sthr_conformance_b', agentName: 'right', steps: [{ tool: 'bash', input: { command: stamp('b') } }] },
          ],
        },
      ],
    });
    const client = new Anthropic({ apiKey: 'not-used-by-the-worker', baseURL: emu.baseURL, logLevel: 'off' });
    const options = {
      client,
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      workdir: join(tmp, 'work'),
      maxConcurrentCalls: 2,
    };
    const worker = new EnvironmentWorker(options);
    const stop = new AbortController();
    const running = worker.run(stop.signal);
    let done;
    try {
      done = await emu.waitForSession(sessionId, { timeoutMs: 40_000 });
    } finally {
      stop.abort();
      await running.catch(() => undefined);
    }
    expect(done.workStopped).toBe(true);
    expect(done.toolResults.map((r) => [r.threadId, r.isError]).sort()).toEqual([
      ['sthr_conformance_a', false],
      ['sthr_conformance_b', false],
    ]);
    // When each command ran, from its own output (ms since the epoch on this machine).
    const span = (name: string): { start: number; end: number } => {
      const text = done.toolResults.find((r) => r.text.includes(`${name} start`))!.text;
      return {
        start: Number(new RegExp(`${name} start (\\d+)`).exec(text)![1]),
        end: Number(new RegExp(`${name} end (\\d+)`).exec(text)![1]),
      };
    };
    const [a, b] = [span('a'), span('b')];
    // From the emulator's records: from the first call to the last answer.
    const wallMs = Math.max(...done.toolResults.map((r) => r.answeredAtMs)) - Math.min(...done.toolResults.map((r) => r.calledAtMs));
    console.log(`two threads: a ran ${a.start}..${a.end}, b ran ${b.start}..${b.end}; first call to last answer ${wallMs} ms`);
    const threadEvents = emu.events(sessionId).filter((e) => e.type.startsWith('session.thread_'));
    expect(threadEvents.filter((e) => e.type === 'session.thread_status_terminated')).toHaveLength(2);
    if (sdkAtLeast('1.16.0')) {
      expect(a.start).toBeLessThan(b.end);
      expect(b.start).toBeLessThan(a.end);
      expect(wallMs).toBeLessThan(3_500);
    } else {
      expect(Math.max(a.start, b.start)).toBeGreaterThanOrEqual(Math.min(a.end, b.end));
      expect(wallMs).toBeGreaterThanOrEqual(4_000);
    }
  });

  it('ends the item on a graceful stop, read from the heartbeat that answers lease_extended: false', async () => {
    const { sessionId, workId } = await emu.createSession({
      script: [{ tool: 'bash', input: { command: 'sleep 30' } }],
      end: 'idle',
    });
    const client = new Anthropic({ apiKey: 'not-used-by-the-worker', baseURL: emu.baseURL, logLevel: 'off' });
    const worker = new EnvironmentWorker({
      client,
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      workdir: join(tmp, 'work'),
    });
    const stop = new AbortController();
    const running = worker.run(stop.signal);
    try {
      await waitFor(() => emu.session(sessionId).scriptProgress.includes('waiting for the result of bash'), 20_000, 'the bash call');
      await waitFor(() => emu.workItem(workId).heartbeats >= 1, 20_000, 'the first heartbeat');
      const stoppedAt = Date.now();
      emu.stopWork(workId);
      await waitFor(() => emu.workItem(workId).state === 'stopped', 20_000, 'the worker to stop the item');
      // Heartbeats come every ttl/2 = 2 s; the worker stops well before its bash call would end.
      expect(Date.now() - stoppedAt).toBeLessThan(15_000);
    } finally {
      stop.abort();
      await running.catch(() => undefined);
    }
    const beats = emu.requests.filter((r) => r.route === 'POST /v1/environments/:id/work/:workId/heartbeat');
    expect(beats.length).toBeGreaterThanOrEqual(2);
    const stops = emu.requests.filter((r) => r.route === 'POST /v1/environments/:id/work/:workId/stop');
    expect(stops.map((r) => [r.credential, r.body, r.status])).toEqual([['sessions_token', { force: true }, 200]]);
  });

  it('ends the item when the session is archived, which adds no event to its history', async () => {
    const { sessionId, workId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo hi' } }], end: 'idle' });
    const client = new Anthropic({ apiKey: 'not-used-by-the-worker', baseURL: emu.baseURL, logLevel: 'off' });
    const worker = new EnvironmentWorker({
      client,
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      workdir: join(tmp, 'work'),
    });
    const stop = new AbortController();
    const running = worker.run(stop.signal);
    try {
      await waitFor(() => emu.session(sessionId).toolResults.length === 1, 20_000, 'the bash result');
      const archivedAt = Date.now();
      emu.archiveSession(sessionId);
      await waitFor(() => emu.workItem(workId).state === 'stopped', 20_000, 'the worker to stop the item');
      // Well before the runner's 60 s idle bound: the worker read the archive, not a timeout.
      expect(Date.now() - archivedAt).toBeLessThan(15_000);
    } finally {
      stop.abort();
      await running.catch(() => undefined);
    }
    expect(emu.events(sessionId).map((e) => e.type)).not.toContain('session.status_terminated');
    expect(emu.session(sessionId).toolResults.map((r) => r.text)).toEqual([expect.stringContaining('hi')]);
  });
});
