// Pins that a store's mount path (the session's to choose) never lies inside the worker's state
// folder, nor under `<workdir>/sessions/`. Measured on the code before this guard: tenant A's store
// mounted at `<stateDir>/content-cache/<shard>` received tenant B's cached memory as a file, which
// A's agent read and A's sync uploaded into A's store.
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { harness, waitFor, type Harness } from './helpers.js';

const SECRET = 'tenant B secret: the launch date is 2027-01-04';

describe("a store's mount path inside the worker's own folders", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it("inside the state folder: refused, so another tenant's cached content never reaches the agent or its store", async () => {
    const { emu } = h;
    const shard = createHash('sha256').update(SECRET).digest('hex').slice(0, 2);
    await fsp.mkdir(path.join(h.stateDir, 'content-cache'), { recursive: true, mode: 0o700 });
    const inCache = path.join(h.stateDir, 'content-cache', shard);
    const storeA = await emu.createMemoryStore({ name: 'a-notes' });
    const storeB = await emu.createMemoryStore({ name: 'b-notes', memories: { '/plan.md': SECRET } });
    const a = await emu.createSession({
      resources: [{ memoryStoreId: storeA.id, mountPath: inCache }],
      script: [{ sleepMs: 2_500 }, { tool: 'bash', input: { command: `cat ${inCache}/* 2>/dev/null; echo done` } }],
    });
    const b = await emu.createSession({
      resources: [{ memoryStoreId: storeB.id }],
      script: [{ tool: 'bash', input: { command: 'true' } }],
    });
    const worker = h.worker({ concurrency: 2 });
    const running = worker.run();
    // A's item ends unserved once its mount is refused (the fix); before, it ran to its end.
    const [doneA] = await Promise.all([
      emu.waitForSession(a.sessionId, { timeoutMs: 20_000 }).catch(() => undefined),
      emu.waitForSession(b.sessionId, { timeoutMs: 20_000 }),
    ]);
    await worker.close();
    await running;

    expect(JSON.stringify(emu.memories(storeA.id))).not.toContain(SECRET);
    expect((doneA?.toolResults ?? []).map((r) => r.text).join('')).not.toContain(SECRET);
    const refusal = h.capture.lines.find((l) =>
      String(JSON.stringify(l)).includes(`its mount path ${inCache} is inside the worker's state folder`),
    );
    expect(refusal).toBeDefined();
  });

  it('under <workdir>/sessions/: refused, never mounted in (or as) another session’s tool folder', async () => {
    const { emu } = h;
    const store = await emu.createMemoryStore({ name: 'x', memories: { '/a.md': 'A' } });
    const target = path.join(h.workdir, 'sessions', 'sesn_someone_else');
    await fsp.mkdir(path.join(h.workdir, 'sessions'));
    const s = await emu.createSession({
      resources: [{ memoryStoreId: store.id, mountPath: target }],
      script: [{ tool: 'bash', input: { command: `ls ${target}` } }],
    });
    const worker = h.worker({ concurrency: 2 });
    const running = worker.run();
    const done = await emu.waitForSession(s.sessionId, { timeoutMs: 20_000 }).catch(() => undefined);
    await worker.close();
    await running;
    expect((done?.toolResults ?? []).map((r) => r.text).join('')).not.toContain('a.md');
    expect(h.capture.lines.some((l) => JSON.stringify(l).includes(`its mount path ${target} is inside`))).toBe(true);
    expect(await fsp.readdir(path.join(h.workdir, 'sessions'))).toEqual([]);
  });
});

describe("a store's mount path inside another worker's mounted store", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('is refused: the outer store never gets the inner one’s files (two workers, each with its own path locks)', async () => {
    const { emu } = h;
    const outer = await emu.createMemoryStore({ name: 'outer' });
    const inner = await emu.createMemoryStore({ name: 'inner', memories: { '/plan.md': SECRET } });
    const outerRoot = path.join(h.mountRoot, 'outer');
    const innerRoot = path.join(outerRoot, 'inner');
    const a = await emu.createSession({
      resources: [{ memoryStoreId: outer.id, mountPath: outerRoot }],
      script: [{ sleepMs: 2_000 }, { tool: 'bash', input: { command: `cat ${innerRoot}/plan.md 2>/dev/null; echo done` } }],
    });
    // Tools in the worker process: each store's folder is its mount path on the host (sandboxed
    // sessions hold copies of their own under the state folder, which never nest).
    const first = h.worker({ sandbox: 'none' });
    const runFirst = first.run();
    await new Promise<void>((resolve) => first.once('sessionStarted', () => resolve()));
    const b = await emu.createSession({
      resources: [{ memoryStoreId: inner.id, mountPath: innerRoot }],
      script: [{ sleepMs: 4_000 }, { tool: 'bash', input: { command: 'true' } }],
    });
    const second = h.worker({ sandbox: 'none' });
    const runSecond = second.run();
    const [doneA] = await Promise.all([
      emu.waitForSession(a.sessionId, { timeoutMs: 20_000 }),
      emu.waitForSession(b.sessionId, { timeoutMs: 20_000 }).catch(() => undefined),
    ]);
    await Promise.all([first.close(), second.close()]);
    await Promise.all([runFirst, runSecond]);

    expect(JSON.stringify(emu.memories(outer.id))).not.toContain(SECRET);
    expect(doneA.toolResults.map((r) => r.text).join('')).not.toContain(SECRET);
    expect(
      h.capture.lines.some((l) =>
        JSON.stringify(l).includes(`the mount path ${innerRoot} is inside ${outerRoot}, the folder of another memory store`),
      ),
    ).toBe(true);
  });
});
