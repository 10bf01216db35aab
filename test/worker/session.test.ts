// Pins one full session served by run(): lease before download, stores mounted and exposed to the
// SDK toolset (read-only refused), the agent's writes and a Console edit synced (store wins on a
// conflict, warning logged, tool call succeeded), folders removed, item force-stopped with the
// item credential, events and log bindings carrying the ids.
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SESSION_STORES_FOLDER } from '../../src/worker/store-placement.js';
import { exists, harness, type Harness } from './helpers.js';

describe('EnvironmentWorker.run serving one session with two stores', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('mounts, serves, syncs, unmounts and stops the item', async () => {
    const { emu } = h;
    const prefs = await emu.createMemoryStore({ name: 'User Preferences', memories: { '/tone.md': 'brief', '/notes/todo.md': 'milk' } });
    const handbook = await emu.createMemoryStore({ name: 'Team Handbook', memories: { '/rules.md': 'be kind' } });
    const prefsDir = path.join(h.mountRoot, 'user-preferences');
    const handbookDir = path.join(h.mountRoot, 'team-handbook');
    const { sessionId, workId } = await emu.createSession({
      resources: [
        { memoryStoreId: prefs.id, access: 'read_write' },
        { memoryStoreId: handbook.id, access: 'read_only' },
      ],
      script: [
        { tool: 'read', input: { file_path: path.join(prefsDir, 'tone.md') } },
        { tool: 'write', input: { file_path: path.join(prefsDir, 'ideas/new.md'), content: 'fresh' } },
        { tool: 'edit', input: { file_path: path.join(prefsDir, 'tone.md'), old_string: 'brief', new_string: 'agent tone' } },
        { console: (e) => e.putMemory(prefs.id, '/tone.md', 'console tone') },
        { tool: 'write', input: { file_path: path.join(handbookDir, 'rules.md'), content: 'no rules' } },
      ],
    });
    const worker = h.worker();
    const events: string[] = [];
    let started: { stores: number; readyMs: number } | undefined;
    worker.on('workClaimed', (e) => events.push(`claimed:${e.workId}`));
    worker.on('sessionStarted', (e) => {
      started = e;
      events.push('started');
    });
    worker.on('mounted', (e) => events.push(`mounted:${e.storeId}:${e.workId}:${e.sessionId}`));
    worker.on('conflict', (e) => events.push(`conflict:${e.path}`));
    worker.on('workStopped', (e) => events.push(`stopped:${e.workId}`));
    const ended = new Promise<unknown>((resolve) => worker.on('sessionEnded', resolve));
    const running = worker.run();
    const done = await emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    const endedEvent = (await ended) as { outcome: { status: string }; flush?: { removed: string[] } };
    await worker.close();
    await running;

    expect(done.toolResults.map((r) => [r.name, r.isError])).toEqual([
      ['read', false],
      ['write', false],
      ['edit', false],
      ['write', true],
    ]);
    expect(done.toolResults[0]!.text).toContain('brief');
    expect(emu.memories(prefs.id)).toEqual({ '/ideas/new.md': 'fresh', '/notes/todo.md': 'milk', '/tone.md': 'console tone' });
    expect(emu.memories(handbook.id)).toEqual({ '/rules.md': 'be kind' });
    expect(await exists(prefsDir)).toBe(false);
    expect(await exists(handbookDir)).toBe(false);
    expect(done.workStopped).toBe(true);
    expect(endedEvent.outcome.status).toBe('completed');
    // Sandboxed: each store's folder was the session's own, under the state folder, gone at its end.
    const own = path.join(h.stateDir, SESSION_STORES_FOLDER, sessionId);
    expect(endedEvent.flush?.removed.map((p) => path.dirname(p))).toEqual([own, own]);
    expect(await exists(own)).toBe(false);
    expect(started?.stores).toBe(2);
    expect(events[0]).toBe(`claimed:${workId}`);
    expect(events).toContain(`mounted:${prefs.id}:${workId}:${sessionId}`);
    expect(events).toContain('conflict:tone.md');
    expect(events.at(-1)).toBe(`stopped:${workId}`);
    // The conflict was logged as a warning with the item's ids bound.
    const conflictLine = h.capture.lines.find((l) => l.level === 40 && /conflict|store wins/i.test(l.msg));
    expect(conflictLine?.['work_id']).toBe(workId);
    expect(conflictLine?.['session_id']).toBe(sessionId);

    // Wire order and credentials: the first heartbeat precedes every memory request; polls use the
    // environment key, everything per item the sessions token, the stop is forced.
    const reqs = emu.requests;
    const firstBeat = reqs.findIndex((r) => r.route.endsWith('/heartbeat'));
    const firstMemory = reqs.findIndex((r) => r.path.startsWith('/v1/memory_stores'));
    expect(firstBeat).toBeGreaterThanOrEqual(0);
    expect(firstBeat).toBeLessThan(firstMemory);
    expect(new Set(reqs.filter((r) => r.route.endsWith('/work/poll')).map((r) => r.credential))).toEqual(new Set(['environment_key']));
    const perItem = reqs.filter(
      (r) =>
        r.path.startsWith('/v1/memory_stores') ||
        r.path.startsWith('/v1/sessions') ||
        r.route.endsWith('/heartbeat') ||
        r.route.endsWith('/stop'),
    );
    expect(new Set(perItem.map((r) => r.credential))).toEqual(new Set(['sessions_token']));
    const stops = reqs.filter((r) => r.route.endsWith('/stop'));
    expect(stops.map((r) => r.body)).toEqual([{ force: true }]);
    expect(worker.metrics()).toMatchObject({ itemsClaimed: 1, itemsCompleted: 1, itemsFailed: 0, sessionsActive: 0, conflicts: 1 });
    void fsp;
  });
});
