/**
 * Pins the journal and the adoption of leftovers, with the real SDK client, the emulator and real
 * folders. A journal entry exists for each mounted store from the moment its folder does, follows
 * every sync that changed the state, never holds a credential, lives in a 0700 state folder and
 * goes with the folder. A worker that died (simulated by a journal whose owner pid is gone, or
 * whose boot id differs; the real SIGKILL test lives with the soak) leaves a folder the next mount
 * of that store adopts: the dead session's edits reach the store, the store wins conflicts with
 * the local bytes kept as a copy, and the path is free after the unmount. Anything else at the
 * path is still refused, saying whether it is a recoverable leftover.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMountError } from '../../../src/errors.js';
import { MemoryMounter, SyncLoop } from '../../../src/memory/index.js';
import { Journal } from '../../../src/memory/journal/journal.js';
import { captureLogger, harness, manualClock, openSession, readTree, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

function deadPid(): number {
  return spawnSync('true').pid!;
}

/** Rewrite the journal entry of `root` as if its owner had died. */
async function killOwner(stateDir: string, root: string, how: 'pid' | 'boot' = 'pid'): Promise<void> {
  const file = new Journal(stateDir).fileFor(root);
  const entry = JSON.parse(await fsp.readFile(file, 'utf8')) as { owner: { pid: number; bootId?: string } };
  if (how === 'pid') entry.owner = { pid: deadPid() };
  else entry.owner = { ...entry.owner, bootId: 'a-boot-long-gone' };
  await fsp.writeFile(file, JSON.stringify(entry));
}

async function mountStore(memories: Record<string, string>, name = 'Notes') {
  const store = await h.emu.createMemoryStore({ name, memories });
  const opened = await openSession(h.emu, [{ memoryStoreId: store.id }]);
  return { storeId: store.id, root: path.join(h.mountRoot, name.toLowerCase()), ...opened };
}

describe('the journal', () => {
  it('is written at mount, follows a sync that changed the state, holds no credential and goes with the folder', async () => {
    const s = await mountStore({ '/a.md': 'a', '/b.md': 'b' });
    const { logger } = captureLogger();
    const mounted = await new MemoryMounter({ client: s.client, logger, stateDir: h.stateDir }).mount(s.session, { workId: 'work_1' });
    const journal = new Journal(h.stateDir);
    const file = journal.fileFor(s.root);
    expect((await fsp.stat(h.stateDir)).mode & 0o777).toBe(0o700);
    expect((await fsp.stat(path.dirname(file))).mode & 0o777).toBe(0o700);
    const first = await journal.read(s.root);
    expect(first).toMatchObject({
      storeId: s.storeId,
      sessionId: s.session.id,
      workId: 'work_1',
      root: s.root,
      owner: { pid: process.pid },
      state: { baseline: { 'a.md': { sha: expect.any(String) }, 'b.md': { sha: expect.any(String) } } },
    });
    const text = await fsp.readFile(file, 'utf8');
    const token = h.emu.sessionsToken(s.session.id)!;
    expect(token.length).toBeGreaterThan(8);
    expect(text).not.toContain(token);

    const loop = new SyncLoop({ client: s.client, mounted, logger, stateDir: h.stateDir, clock: manualClock() });
    await fsp.writeFile(path.join(s.root, 'a.md'), 'a edited');
    await loop.syncNow();
    const after = (await journal.read(s.root)) as { state: { baseline: Record<string, { sha: string }> } };
    expect(after.state.baseline['a.md']!.sha).not.toBe((first as typeof after).state.baseline['a.md']!.sha);
    const mtime = (await fsp.stat(file)).mtimeMs;
    await loop.syncNow();
    expect((await fsp.stat(file)).mtimeMs).toBe(mtime);

    await loop.finish({ clean: true });
    expect(fs.existsSync(s.root)).toBe(false);
    expect(fs.existsSync(file)).toBe(false);
  });

  it('refuses a state folder that is a symlink, creates nothing and names the fix', async () => {
    const s = await mountStore({ '/a.md': 'a' });
    const real = path.join(h.tmp, 'elsewhere');
    await fsp.mkdir(real);
    const linked = path.join(h.tmp, 'state-link');
    await fsp.symlink(real, linked);
    const err = await new MemoryMounter({ client: s.client, logger: captureLogger().logger, stateDir: linked })
      .mount(s.session)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MemoryMountError);
    expect((err as Error).message).toMatch(/state-link is a symlink/);
    expect((err as Error).message).toMatch(/stateDir/);
    expect(fs.existsSync(s.root)).toBe(false);
    expect(await fsp.readdir(real)).toEqual([]);
  });
});

describe('a leftover of a worker that died', () => {
  for (const how of ['pid', 'boot'] as const) {
    it(`is adopted by the next mount of its store (owner ${how === 'pid' ? 'pid gone' : 'from another boot'}): the edit reaches the store and the path is free after`, async () => {
      const s = await mountStore({ '/a.md': 'a', '/b.md': 'b', '/c.md': 'c' });
      const { logger } = captureLogger();
      await new MemoryMounter({ client: s.client, logger, stateDir: h.stateDir }).mount(s.session);
      // The agent edits, then the worker dies: no sync, no unmount.
      await fsp.writeFile(path.join(s.root, 'a.md'), 'edited before the crash');
      await fsp.writeFile(path.join(s.root, 'new.md'), 'created before the crash');
      await fsp.writeFile(path.join(s.root, 'c.md'), 'agent c');
      await killOwner(h.stateDir, s.root, how);
      // Meanwhile in the Console: b changes (not touched locally), c changes (edited on both sides).
      h.emu.putMemory(s.storeId, '/b.md', 'console b');
      h.emu.putMemory(s.storeId, '/c.md', 'console c');

      const next = await openSession(h.emu, [{ memoryStoreId: s.storeId }]);
      const cap = captureLogger();
      const mounted = await new MemoryMounter({ client: next.client, logger: cap.logger, stateDir: h.stateDir }).mount(next.session);
      expect(h.emu.memories(s.storeId)).toEqual({
        '/a.md': 'edited before the crash',
        '/b.md': 'console b',
        '/c.md': 'console c',
        '/new.md': 'created before the crash',
      });
      expect(await readTree(s.root)).toEqual({
        'a.md': 'edited before the crash',
        'b.md': 'console b',
        'c.md': 'console c',
        'new.md': 'created before the crash',
      });
      const copies = await readTree(path.join(h.stateDir, 'conflicts'));
      expect(Object.values(copies)).toEqual(['agent c']);
      expect(cap.warnings().some((m) => /adopting the leftover folder/.test(m))).toBe(true);
      const entry = await new Journal(h.stateDir).read(s.root);
      expect(entry).toMatchObject({ sessionId: next.session.id, owner: { pid: process.pid } });

      await mounted.unmount();
      expect(fs.existsSync(s.root)).toBe(false);
      expect(await new Journal(h.stateDir).read(s.root)).toBeUndefined();
    });
  }

  it('is handed back, not removed, when another store of the mount fails; the next mount in this process adopts it', async () => {
    const s = await mountStore({ '/a.md': 'a' });
    await new MemoryMounter({ client: s.client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(s.session);
    await fsp.writeFile(path.join(s.root, 'a.md'), 'edited before the crash');
    await killOwner(h.stateDir, s.root);
    const broken = await h.emu.createMemoryStore({ name: 'Broken', memories: { '/x.md': 'x' } });
    const fault = h.emu.faults.add({ route: new RegExp(`GET /v1/memory_stores/${broken.id}/memories`), status: 400 });
    const both = await openSession(h.emu, [{ memoryStoreId: s.storeId }, { memoryStoreId: broken.id }]);
    const err = await new MemoryMounter({ client: both.client, logger: captureLogger().logger, stateDir: h.stateDir })
      .mount(both.session)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MemoryMountError);
    expect(fs.existsSync(path.join(h.mountRoot, 'broken'))).toBe(false);
    expect(fs.existsSync(s.root)).toBe(true);
    fault.remove();
    const next = await openSession(h.emu, [{ memoryStoreId: s.storeId }]);
    const mounted = await new MemoryMounter({ client: next.client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(
      next.session,
    );
    expect(h.emu.memories(s.storeId)).toEqual({ '/a.md': 'edited before the crash' });
    await mounted.unmount();
    expect(fs.existsSync(s.root)).toBe(false);
  });

  it('an empty folder it created before writing the marker is cleared, and the store mounts', async () => {
    const s = await mountStore({ '/a.md': 'a' });
    await new MemoryMounter({ client: s.client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(s.session);
    // As if it died between the mkdir and the marker: an empty folder, a journal entry.
    for (const name of await fsp.readdir(s.root)) await fsp.rm(path.join(s.root, name), { recursive: true });
    await killOwner(h.stateDir, s.root);
    const next = await openSession(h.emu, [{ memoryStoreId: s.storeId }]);
    const mounted = await new MemoryMounter({ client: next.client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(
      next.session,
    );
    expect(await readTree(s.root)).toEqual({ 'a.md': 'a' });
    await mounted.unmount();
  });

  it('a folder half removed at its session end (killed during the unmount) is cleared, and the store mounts', async () => {
    const s = await mountStore({ '/a.md': 'a', '/b.md': 'b' });
    const mounted = await new MemoryMounter({ client: s.client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(s.session);
    // Run the end up to the removal, then stop as a kill would: the entry says "unmounting".
    await mounted.stores[0]!.writeJournal({ unmounting: true });
    await fsp.rm(path.join(s.root, '.anthropic-memory-store'));
    await killOwner(h.stateDir, s.root);
    const next = await openSession(h.emu, [{ memoryStoreId: s.storeId }]);
    const again = await new MemoryMounter({ client: next.client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(
      next.session,
    );
    expect(await readTree(s.root)).toEqual({ 'a.md': 'a', 'b.md': 'b' });
    expect(h.emu.memories(s.storeId)).toEqual({ '/a.md': 'a', '/b.md': 'b' });
    await again.unmount();
  });

  it('killed mid-download, is cleared and downloaded again: a half-written file, or one whose memory was deleted since, is never uploaded', async () => {
    const memories: Record<string, string> = {};
    for (let i = 0; i < 60; i++) memories[`/m-${String(i).padStart(2, '0')}.md`] = `memory ${i} `.repeat(20);
    const s = await mountStore(memories);
    // The whole store's first page (more follow: dropped) and two depth-1 pages answer, the third
    // never does: the download stops with 40 files written.
    const fault = h.emu.faults.add({ route: new RegExp(`GET /v1/memory_stores/${s.storeId}/memories`), skip: 3, hang: true });
    const ctrl = new AbortController();
    const first = new MemoryMounter({ client: s.client, logger: captureLogger().logger, stateDir: h.stateDir })
      .mount(s.session, { signal: ctrl.signal })
      .catch((e: unknown) => e);
    const written = (): number => (fs.existsSync(s.root) ? fs.readdirSync(s.root).filter((n) => n.endsWith('.md')).length : 0);
    for (let i = 0; i < 500 && written() < 40; i++) await new Promise((r) => setTimeout(r, 20));
    expect(written()).toBe(40);
    // What a SIGKILL now leaves on disk: the folder and its journal entry as they are.
    const journalFile = new Journal(h.stateDir).fileFor(s.root);
    const entryAtKill = await fsp.readFile(journalFile, 'utf8');
    const saved = path.join(h.tmp, 'at-kill');
    fs.cpSync(s.root, saved, { recursive: true });
    ctrl.abort();
    await first;
    fault.remove();
    fs.cpSync(saved, s.root, { recursive: true });
    await fsp.writeFile(journalFile, entryAtKill);
    await killOwner(h.stateDir, s.root);
    // The kill cut one write short; and in the Console, a memory already written is deleted.
    await fsp.truncate(path.join(s.root, 'm-00.md'), 10);
    await fsp.truncate(path.join(s.root, 'm-01.md'), 10);
    h.emu.removeMemory(s.storeId, '/m-01.md');
    const expected = { ...memories };
    delete expected['/m-01.md'];

    const next = await openSession(h.emu, [{ memoryStoreId: s.storeId }]);
    const mounted = await new MemoryMounter({ client: next.client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(
      next.session,
    );
    expect(h.emu.memories(s.storeId)).toEqual(expected);
    // No torn bytes ever reached the store.
    expect(h.emu.memoryHistory(s.storeId).filter((w) => w.content !== null && w.content.length <= 10)).toEqual([]);
    expect(await readTree(s.root)).toEqual(Object.fromEntries(Object.entries(expected).map(([p, c]) => [p.slice(1), c])));
    expect(fs.existsSync(path.join(h.stateDir, 'conflicts'))).toBe(false);
    await mounted.unmount();
    expect(fs.existsSync(s.root)).toBe(false);
  });

  it('is refused while its owner still runs, as a recoverable leftover in use', async () => {
    const s = await mountStore({ '/a.md': 'a' });
    await new MemoryMounter({ client: s.client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(s.session);
    const next = await openSession(h.emu, [{ memoryStoreId: s.storeId }]);
    const err = await new MemoryMounter({ client: next.client, logger: captureLogger().logger, stateDir: h.stateDir })
      .mount(next.session)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MemoryMountError);
    expect((err as Error).message).toMatch(/recoverable leftover of this store is there, but its owner still runs/);
    expect((err as Error).message).toMatch(/recover/);
  });

  it('without a journal entry (another state folder) is refused as not recoverable, and left as found', async () => {
    const s = await mountStore({ '/a.md': 'a' });
    await new MemoryMounter({ client: s.client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(s.session);
    await fsp.writeFile(path.join(s.root, 'a.md'), 'edited');
    const next = await openSession(h.emu, [{ memoryStoreId: s.storeId }]);
    const err = await new MemoryMounter({ client: next.client, logger: captureLogger().logger, stateDir: path.join(h.tmp, 'other-state') })
      .mount(next.session)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MemoryMountError);
    expect((err as Error).message).toMatch(/no journal entry for it .*not a recoverable leftover/);
    expect(await readTree(s.root)).toEqual({ 'a.md': 'edited' });
  });

  it('of another store at the path is refused and left as found', async () => {
    const s = await mountStore({ '/a.md': 'a' });
    await new MemoryMounter({ client: s.client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(s.session);
    await killOwner(h.stateDir, s.root);
    const other = await h.emu.createMemoryStore({ name: 'Other', memories: {} });
    const next = await openSession(h.emu, [{ memoryStoreId: other.id, mountPath: s.root }]);
    const err = await new MemoryMounter({ client: next.client, logger: captureLogger().logger, stateDir: h.stateDir })
      .mount(next.session)
      .catch((e: unknown) => e);
    expect((err as Error).message).toMatch(new RegExp(`another memory store \\(${s.storeId}\\)`));
    expect(await readTree(s.root)).toEqual({ 'a.md': 'a' });
  });
});
