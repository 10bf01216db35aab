/**
 * Pins crash recovery through the worker, with the real SDK client, the emulator and real folders.
 * A worker that died with a store mounted (simulated: a mount left in place whose journal owner is
 * an exited process) leaves a folder; `run()` names it at start in one line pointing at `recover`,
 * and the next session of that store adopts it instead of failing with "already exists": the dead
 * session's edit reaches the store, the new session runs, and at its end a file the store refuses
 * (binary) is copied to the state folder and counted in `sessionEnded`, and the folder is removed.
 */
import { spawnSync } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMounter } from '../../src/memory/index.js';
import { Journal } from '../../src/memory/journal/journal.js';
import type { FinishReport } from '../../src/worker/memory-port.js';
import { exists, harness, type Harness } from './helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

describe('a worker killed with a store mounted', () => {
  it('leaves a folder the next session of the store adopts; run() names it at start', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'a', '/b.md': 'b' } });
    const root = path.join(h.mountRoot, 'notes');
    // The session that was running when the worker died.
    const dead = await h.emu.createSession({ resources: [{ memoryStoreId: store.id }] });
    const deadClient = h.emu.sessionClient(dead.sessionId);
    const session = await deadClient.beta.sessions.retrieve(dead.sessionId);
    await new MemoryMounter({ client: deadClient, logger: h.capture.logger, stateDir: h.stateDir }).mount(session, { workId: dead.workId });
    await fsp.writeFile(path.join(root, 'a.md'), 'edited right before kill -9');
    const file = new Journal(h.stateDir).fileFor(root);
    const entry = JSON.parse(await fsp.readFile(file, 'utf8')) as { owner: unknown };
    entry.owner = { pid: spawnSync('true').pid! };
    await fsp.writeFile(file, JSON.stringify(entry));
    h.emu.archiveSession(dead.sessionId);

    const { sessionId } = await h.emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [
        { tool: 'read', input: { file_path: path.join(root, 'a.md') } },
        { tool: 'bash', input: { command: `printf '\\377\\000\\376' > ${path.join(root, 'blob.bin')}` } },
      ],
    });
    // Tools in the worker process: the next session's folder is the store's mount path, where the
    // leftover is (a sandboxed session holds a copy of its own and leaves it to `recover`).
    const worker = h.worker({ sandbox: 'none' });
    const ended = new Promise<{ outcome: { status: string }; flush?: FinishReport }>((resolve) => worker.on('sessionEnded', resolve));
    const running = worker.run();
    const done = await h.emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    const end = await ended;
    await worker.close();
    await running;

    const leftoverLines = h.capture.lines.filter((l) => /leftover memory folder of a worker that is gone/.test(l.msg));
    expect(leftoverLines).toHaveLength(1);
    expect(leftoverLines[0]).toMatchObject({ root, memory_store_id: store.id });
    expect(leftoverLines[0]!.msg).toMatch(/managed-agents-worker recover/);
    expect(end.outcome.status).toBe('completed');
    expect(done.toolResults[0]!.text).toContain('edited right before kill -9');
    expect(h.emu.memories(store.id)).toEqual({ '/a.md': 'edited right before kill -9', '/b.md': 'b' });
    expect(end.flush?.unsavedCopies).toHaveLength(1);
    expect(Buffer.from(await fsp.readFile(end.flush!.unsavedCopies[0]!)).equals(Buffer.from([0xff, 0x00, 0xfe]))).toBe(true);
    expect(end.flush?.removed).toEqual([root]);
    expect(await exists(root)).toBe(false);
    expect(await new Journal(h.stateDir).read(root)).toBeUndefined();
  });
});
