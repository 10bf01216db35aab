// Pins per-session store folders: with each session's toolset in a bubblewrap sandbox (real
// bubblewrap, the built tool host), two sessions attaching the same read-write store and the same
// read-only store run at the same time at `concurrency: 2` (their tool calls overlap in time), each
// sees both stores at their mount paths (nothing of them on the host there: each session's copy
// lives in its own folder under the state folder), each one's edit of a different memory reaches
// the store, and an edit of the same memory by both ends as between two hosts: the store keeps one
// version, the other is kept as a conflict copy, with a warning. With `sandbox: 'none'` the second
// session still waits for the first (they would share the host's one folder).
// Needs `npm run build` (the sandbox's tool host runs from dist/).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ScriptStep } from '../../src/testing/index.js';
import { SESSION_STORES_FOLDER } from '../../src/worker/store-placement.js';
import { harness, type Harness } from './helpers.js';

const sh = (command: string): ScriptStep => ({ tool: 'bash', input: { command: `{ ${command}; } 2>&1; echo "exit=$?"` } });

/** The first line of a bash result that is a millisecond timestamp. */
function stamp(text: string): number {
  const line = text.split('\n').find((l) => /^\d{13}$/.test(l.trim()));
  if (line === undefined) throw new Error(`no timestamp in ${JSON.stringify(text)}`);
  return Number(line.trim());
}

describe('two sessions of the same stores, each toolset sandboxed', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness({ leaseTtlSeconds: 4 });
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('run side by side, each on its own copy at the same mount paths, and end by the store-wins rules', async () => {
    const { emu } = h;
    const notes = await emu.createMemoryStore({ name: 'Notes', memories: { '/shared.md': 'base' } });
    const handbook = await emu.createMemoryStore({ name: 'Handbook', memories: { '/policy.md': 'policy v1' } });
    const notesDir = path.join(h.mountRoot, 'notes');
    const handbookDir = path.join(h.mountRoot, 'handbook');
    const onHost: string[][] = [];
    const script = (who: 'A' | 'B'): ScriptStep[] => [
      sh(`date +%s%3N; cat ${notesDir}/.anthropic-memory-store; echo; cat ${handbookDir}/policy.md; echo; ls ${notesDir}`),
      { tool: 'write', input: { file_path: path.join(notesDir, `from-${who}.md`), content: `from ${who}` } },
      { tool: 'write', input: { file_path: path.join(notesDir, 'shared.md'), content: `${who} version` } },
      sh(`echo tampered > ${handbookDir}/policy.md`),
      { console: () => onHost.push(fs.readdirSync(h.mountRoot)) },
      // B ends later: A's final sync has uploaded its version when B's runs, so B's is the conflict.
      sh(`sleep ${who === 'A' ? 2 : 4}; date +%s%3N`),
    ];
    const resources = [{ memoryStoreId: notes.id }, { memoryStoreId: handbook.id, access: 'read_only' as const }];
    const a = await emu.createSession({ resources, script: script('A') });
    const b = await emu.createSession({ resources, script: script('B') });
    const worker = h.worker({ concurrency: 2, sandbox: 'bwrap', memorySyncIntervalMs: 60_000, pathWaitMs: 60_000 });
    const conflicts: Array<{ sessionId: string; path: string; conflictCopy: string | undefined }> = [];
    const mounted: Array<{ sessionId: string; root: string }> = [];
    worker.on('conflict', (e) => conflicts.push(e));
    worker.on('mounted', (e) => mounted.push(e));
    const running = worker.run();
    const [doneA, doneB] = await Promise.all([
      emu.waitForSession(a.sessionId, { timeoutMs: 90_000 }),
      emu.waitForSession(b.sessionId, { timeoutMs: 90_000 }),
    ]);
    await worker.close();
    await running;

    const texts = (d: typeof doneA): string[] => d.toolResults.map((r) => r.text);
    const [seenA, , , roA, endA] = texts(doneA);
    const [seenB, , , roB, endB] = texts(doneB);
    // Their tool calls overlapped in time: each started before the other's last call ended.
    const startA = stamp(seenA!);
    const startB = stamp(seenB!);
    expect(startA).toBeLessThan(stamp(endB!));
    expect(startB).toBeLessThan(stamp(endA!));
    // Each saw both stores at their mount paths, the read-only one read-only.
    for (const seen of [seenA!, seenB!]) {
      expect(seen).toContain(`version 1\n${notes.id}`);
      expect(seen).toContain('policy v1');
      expect(seen).toContain('shared.md');
    }
    for (const ro of [roA!, roB!]) expect(ro).toMatch(/Read-only file system[\s\S]*exit=1/);
    // Nothing of either store on the host at the mount paths: each copy was the session's own.
    expect(onHost).toEqual([[], []]);
    const stores = path.join(h.stateDir, SESSION_STORES_FOLDER);
    for (const m of mounted) expect(m.root.startsWith(`${fs.realpathSync(stores)}/`)).toBe(true);
    expect(new Set(mounted.map((m) => m.root)).size).toBe(4);
    // Every folder is gone once the sessions ended.
    expect(fs.readdirSync(stores)).toEqual([]);

    const final = emu.memories(notes.id);
    expect(final['/from-A.md']).toBe('from A');
    expect(final['/from-B.md']).toBe('from B');
    expect(emu.memories(handbook.id)).toEqual({ '/policy.md': 'policy v1' });
    // The same memory edited by both: the store kept one version, the other is a conflict copy.
    expect(final['/shared.md']).toBe('A version');
    expect(conflicts).toHaveLength(1);
    expect(conflicts[0]!.path).toBe('shared.md');
    expect(conflicts[0]!.sessionId).toBe(b.sessionId);
    expect(fs.readFileSync(conflicts[0]!.conflictCopy!, 'utf8')).toBe('B version');
    const warned = h.capture.lines.filter((l) => l.level === 40 && l.msg.includes("the store's version wins"));
    expect(warned).toHaveLength(1);
    // One line per store and session names both the host folder and the mount path.
    const placed = h.capture.lines.filter((l) => typeof l['host_path'] === 'string' && typeof l['mount_path'] === 'string');
    expect(placed.map((l) => l['mount_path']).sort()).toEqual([handbookDir, handbookDir, notesDir, notesDir]);
  });

  it("a store's later mount while another session holds it copies its contents from the content cache", async () => {
    const { emu } = h;
    const memories: Record<string, string> = {};
    for (let i = 0; i < 40; i++) memories[`/t${i % 4}/m${i}.md`] = `handbook page ${i}`;
    const handbook = await emu.createMemoryStore({ name: 'Handbook', memories });
    const dir = path.join(h.mountRoot, 'handbook');
    const resources = [{ memoryStoreId: handbook.id, access: 'read_only' as const }];
    const a = await emu.createSession({ resources, script: [sh(`cat ${dir}/t1/m1.md`), sh('sleep 8; date +%s%3N')] });
    const worker = h.worker({ concurrency: 2, sandbox: 'bwrap' });
    const running = worker.run();
    // The first mount's contents reach the cache shortly after it ends.
    const cache = path.join(h.stateDir, 'content-cache');
    const blobs = (): number =>
      fs.existsSync(cache)
        ? fs.readdirSync(cache, { recursive: true, withFileTypes: true }).filter((e) => e.isFile() && /^[0-9a-f]{64}$/.test(e.name)).length
        : 0;
    const deadline = Date.now() + 30_000;
    while (blobs() < 40) {
      if (Date.now() > deadline) throw new Error(`the cache holds ${blobs()} of 40 contents after 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const from = emu.requests.length;
    const b = await emu.createSession({ resources, script: [sh(`cat ${dir}/t3/m39.md; echo; date +%s%3N`)] });
    const doneB = await emu.waitForSession(b.sessionId, { timeoutMs: 60_000 });
    const doneA = await emu.waitForSession(a.sessionId, { timeoutMs: 60_000 });
    await worker.close();
    await running;

    expect(doneB.toolResults[0]!.text).toContain('handbook page 39');
    // B ran while A still did (A's last call sleeps 8 s past B's start).
    expect(stamp(doneB.toolResults[0]!.text)).toBeLessThan(stamp(doneA.toolResults[1]!.text));
    const ofStore = emu.requests.slice(from).filter((r) => r.path.startsWith(`/v1/memory_stores/${handbook.id}/memories`));
    const lists = ofStore.filter((r) => r.route === 'GET /v1/memory_stores/:id/memories');
    expect(lists.filter((r) => r.query['view'] === 'full')).toHaveLength(0);
    expect(lists.filter((r) => r.query['view'] === 'basic').length).toBeGreaterThan(0);
    expect(ofStore.filter((r) => r.route === 'GET /v1/memory_stores/:id/memories/:memoryId')).toHaveLength(0);
  });

  it("with sandbox: 'none' the second session waits for the first (they would share the host's folder)", async () => {
    const { emu } = h;
    const notes = await emu.createMemoryStore({ name: 'Notes', memories: { '/shared.md': 'base' } });
    const notesDir = path.join(h.mountRoot, 'notes');
    const script: ScriptStep[] = [sh('date +%s%3N'), sh('sleep 1.5; date +%s%3N')];
    const a = await emu.createSession({ resources: [{ memoryStoreId: notes.id }], script });
    const b = await emu.createSession({ resources: [{ memoryStoreId: notes.id }], script });
    const worker = h.worker({ concurrency: 2, sandbox: 'none', pathWaitMs: 60_000 });
    const mounted: string[] = [];
    worker.on('mounted', (e) => mounted.push(e.root));
    const running = worker.run();
    const [doneA, doneB] = await Promise.all([
      emu.waitForSession(a.sessionId, { timeoutMs: 60_000 }),
      emu.waitForSession(b.sessionId, { timeoutMs: 60_000 }),
    ]);
    await worker.close();
    await running;

    const [first, second] = [doneA, doneB]
      .map((d) => ({ start: stamp(d.toolResults[0]!.text), end: stamp(d.toolResults[1]!.text) }))
      .sort((x, y) => x.start - y.start);
    expect(second!.start).toBeGreaterThanOrEqual(first!.end);
    expect(mounted).toEqual([notesDir, notesDir]);
  });
});
