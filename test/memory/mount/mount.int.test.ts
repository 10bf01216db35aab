/**
 * Pins MemoryMounter against the emulator with the real SDK client and the real filesystem:
 * nested paths materialise as folders with the marker `version 1\n<id>`; refusals (more than 8
 * stores, a missing or unwritable parent, anything at the path including a dangling symlink,
 * unclean or shared mount paths) name the store, the path and the fix and create nothing; a store
 * failing mid-download removes every folder the mount created; unmount removes only what it
 * created and keeps a folder whose marker was altered while it still holds files; each file holds
 * exactly its memory's bytes, whatever the order of long and short ones.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMounter, SyncLoop } from '../../../src/memory/index.js';
import { captureLogger, harness, manualClock, mountError, openSession, readTree, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

describe('mounting', () => {
  it('downloads nested paths into subfolders and writes the marker', async () => {
    const store = await h.emu.createMemoryStore({
      name: 'User Preferences',
      memories: { '/tone.md': 'brief', '/projects/alpha/notes.md': 'α notes ✓', '/empty.md': '' },
    });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const mounted = await new MemoryMounter({ client, logger: captureLogger().logger }).mount(session);
    const root = path.join(h.mountRoot, 'user-preferences');
    expect(mounted.roots).toEqual([root]);
    expect(mounted.stores[0]).toMatchObject({ storeId: store.id, name: 'User Preferences', access: 'read_write', memories: 3 });
    expect(await readTree(root)).toEqual({ 'tone.md': 'brief', 'projects/alpha/notes.md': 'α notes ✓', 'empty.md': '' });
    expect(await fsp.readFile(path.join(root, '.anthropic-memory-store'), 'utf8')).toBe(`version 1\n${store.id}`);
    expect(Object.keys(mounted.stores[0]!.state.baseline).sort()).toEqual(['empty.md', 'projects/alpha/notes.md', 'tone.md']);
    await mounted.unmount();
    expect(fs.existsSync(root)).toBe(false);
    expect(fs.existsSync(h.mountRoot)).toBe(true);
  });

  it('tells onRoots once, when every store folder exists and before any content is written, with the read-only ones', async () => {
    const notes = await h.emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A', '/b/c.md': 'C' } });
    const docs = await h.emu.createMemoryStore({ name: 'Docs', memories: { '/d.md': 'D' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: notes.id }, { memoryStoreId: docs.id, access: 'read_only' }]);
    h.emu.faults.add({ route: /\/memories$/, method: 'GET', latencyMs: 150 });
    // What each folder holds besides dotfiles (the marker) when onRoots is told: nothing yet.
    const seen: Array<{ all: string[]; readOnly: string[]; files: string[][] }> = [];
    const mounted = await new MemoryMounter({ client, logger: captureLogger().logger }).mount(session, {
      onRoots: (roots) => seen.push({ ...roots, files: roots.all.map((r) => fs.readdirSync(r).filter((f) => !f.startsWith('.'))) }),
    });
    const notesRoot = path.join(h.mountRoot, 'notes');
    const docsRoot = path.join(h.mountRoot, 'docs');
    expect(seen).toEqual([{ all: [notesRoot, docsRoot], readOnly: [docsRoot], files: [[], []] }]);
    expect(await readTree(notesRoot)).toEqual({ 'a.md': 'A', 'b/c.md': 'C' });
    await mounted.unmount();
  });

  it('keeps memories named like object properties (__proto__, constructor) in its baseline; the sync leaves them be and uploads such files of the agent once', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Proto', memories: { '/__proto__': 'p', '/constructor': 'c', '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const log = captureLogger();
    const mounted = await new MemoryMounter({ client, logger: log.logger }).mount(session);
    const root = path.join(h.mountRoot, 'proto');
    expect(await readTree(root)).toEqual({ __proto__: 'p', constructor: 'c', 'a.md': 'a' });
    const baseline = mounted.stores[0]!.state.baseline;
    expect(Object.keys(baseline).sort()).toEqual(['__proto__', 'a.md', 'constructor']);
    const loop = new SyncLoop({ client, mounted, logger: log.logger, stateDir: h.stateDir, clock: manualClock() });
    expect(await loop.syncNow()).toMatchObject({ downloads: 0, uploads: 0, conflicts: 0, deletes: 0, errors: 0 });
    // Files the agent names so are uploaded once, then left be.
    await fsp.writeFile(path.join(root, 'toString'), 't');
    await fsp.writeFile(path.join(root, 'hasOwnProperty'), 'h');
    expect(await loop.syncNow()).toMatchObject({ uploads: 2, conflicts: 0, errors: 0 });
    expect(await loop.syncNow()).toMatchObject({ uploads: 0, downloads: 0, errors: 0 });
    await loop.finish({ clean: true });
    expect(h.emu.memories(store.id)).toEqual({
      '/__proto__': 'p',
      '/constructor': 'c',
      '/a.md': 'a',
      '/toString': 't',
      '/hasOwnProperty': 'h',
    });
  });

  it('writes each file with exactly its own bytes, a short file after a long one and multi-byte text included', async () => {
    const memories: Record<string, string> = {};
    for (let i = 0; i < 30; i++) memories[`/f-${String(i).padStart(2, '0')}.md`] = i % 2 === 0 ? `${'é✓'.repeat(2000 + i)}\n` : `s${i}`;
    memories['/f-15.md'] = 'x'.repeat(60_000);
    memories['/f-16.md'] = 'é'.repeat(50_000);
    const store = await h.emu.createMemoryStore({ name: 'Sizes', memories });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const mounted = await new MemoryMounter({ client, logger: captureLogger().logger }).mount(session);
    const tree = await readTree(path.join(h.mountRoot, 'sizes'));
    expect(tree).toEqual(Object.fromEntries(Object.entries(memories).map(([p, c]) => [p.slice(1), c])));
    await mounted.unmount();
  });

  it('lists read-only roots separately', async () => {
    const a = await h.emu.createMemoryStore({ name: 'Writable', memories: { '/a.md': 'a' } });
    const b = await h.emu.createMemoryStore({ name: 'Reference', memories: { '/b.md': 'b' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: a.id }, { memoryStoreId: b.id, access: 'read_only' }]);
    const mounted = await new MemoryMounter({ client, logger: captureLogger().logger }).mount(session);
    expect(mounted.readOnlyRoots).toEqual([path.join(h.mountRoot, 'reference')]);
    expect(mounted.roots).toHaveLength(2);
    await mounted.unmount();
  });

  it('emits mounted with the count and duration of each store', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Events', memories: { '/x.md': 'x' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const mounter = new MemoryMounter({ client, logger: captureLogger().logger });
    const seen: unknown[] = [];
    mounter.on('mounted', (e) => seen.push(e));
    mounter.on('mounted', () => {
      throw new Error('a broken listener');
    });
    const mounted = await mounter.mount(session);
    expect(seen).toEqual([expect.objectContaining({ storeId: store.id, memories: 1 })]);
    await mounted.unmount();
  });
});

describe('names the folder cannot hold', () => {
  it('keeps one of two paths differing only by case on a case-insensitive filesystem and never syncs the other', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Cases', memories: { '/Notes.md': 'upper', '/notes.md': 'lower', '/x.md': 'x' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const log = captureLogger();
    const mounted = await new MemoryMounter({ client, logger: log.logger, assumeCaseInsensitive: true }).mount(session);
    const root = mounted.roots[0]!;
    expect(await readTree(root)).toEqual({ 'Notes.md': 'upper', 'x.md': 'x' });
    expect(Object.keys(mounted.stores[0]!.state.shadowed)).toEqual(['notes.md']);
    const warning = log.lines.find((l) => l.level >= 40 && l['path'] === 'notes.md');
    expect(String(warning?.['reason'])).toContain('"Notes.md"');
    // The shadowed memory is never synced: a Console edit of it does not reach the folder.
    const loop = new SyncLoop({ client, mounted, logger: log.logger, stateDir: h.stateDir, clock: manualClock() });
    h.emu.putMemory(store.id, '/notes.md', 'lower, edited');
    expect(await loop.syncNow()).toMatchObject({ downloads: 0, uploads: 0, errors: 0 });
    expect(await readTree(root)).toEqual({ 'Notes.md': 'upper', 'x.md': 'x' });
    await loop.finish({ clean: true });
    expect(h.emu.memories(store.id)).toEqual({ '/Notes.md': 'upper', '/notes.md': 'lower, edited', '/x.md': 'x' });
  });

  it('never lets a memory named like the marker replace the marker', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Reserved', memories: { '/a.md': 'a' } });
    h.emu.putMemory(store.id, '/.anthropic-memory-store', 'version 1\nmemstore_forged');
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const mounted = await new MemoryMounter({ client, logger: captureLogger().logger }).mount(session);
    const root = mounted.roots[0]!;
    expect(await fsp.readFile(path.join(root, '.anthropic-memory-store'), 'utf8')).toBe(`version 1\n${store.id}`);
    expect(Object.keys(mounted.stores[0]!.state.shadowed)).toEqual(['/.anthropic-memory-store']);
    await mounted.unmount();
  });
});

describe('refusals', () => {
  it('refuses anything already at the mount path, naming the store, the path and the fix', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Taken', memories: { '/a.md': 'a' } });
    const root = path.join(h.mountRoot, 'taken');
    await fsp.mkdir(root);
    await fsp.writeFile(path.join(root, 'precious.txt'), 'keep me');
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const err = await mountError(new MemoryMounter({ client, logger: captureLogger().logger }).mount(session));
    expect(err.code).toBe('MAW_MEMORY_MOUNT');
    expect(err.storeId).toBe(store.id);
    expect(err.path).toBe(root);
    expect(err.message).toContain(store.id);
    expect(err.message).toContain(root);
    expect(err.message).toMatch(/Remove it .* or attach the store at another mount_path/);
    expect(await fsp.readFile(path.join(root, 'precious.txt'), 'utf8')).toBe('keep me');
  });

  it('refuses a dangling symlink at the mount path', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Dangling', memories: { '/a.md': 'a' } });
    const root = path.join(h.mountRoot, 'dangling');
    await fsp.symlink(path.join(h.tmp, 'nowhere'), root);
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const err = await mountError(new MemoryMounter({ client, logger: captureLogger().logger }).mount(session));
    expect(err.message).toContain('a symlink');
    expect(fs.existsSync(path.join(h.tmp, 'nowhere'))).toBe(false);
  });

  it('refuses more than 8 stores and creates nothing', async () => {
    const stores = [];
    for (let i = 0; i < 9; i++) stores.push(await h.emu.createMemoryStore({ name: `Store ${i}`, memories: { '/a.md': `${i}` } }));
    // The emulator (like the API) refuses a 9th attachment, so the 9th resource is added to the
    // session object the worker received, as an API that let it through would send it.
    const { client, session } = await openSession(
      h.emu,
      stores.slice(0, 8).map((s) => ({ memoryStoreId: s.id })),
    );
    const ninth = {
      ...session.resources[0]!,
      memory_store_id: stores[8]!.id,
      name: 'Store 8',
      mount_path: path.join(h.mountRoot, 'store-8'),
    };
    const err = await mountError(
      new MemoryMounter({ client, logger: captureLogger().logger }).mount({ ...session, resources: [...session.resources, ninth] }),
    );
    expect(err.message).toMatch(/attaches 9 memory stores .*at most 8/);
    for (const s of stores) expect(err.message).toContain(s.id);
    expect(err.message).toContain(`${stores[8]!.id} at ${path.join(h.mountRoot, 'store-8')}`);
    expect(await fsp.readdir(h.mountRoot)).toEqual([]);
  });

  it('refuses a missing parent with the host preparation command, never creating the parent', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Orphan', memories: { '/a.md': 'a' } });
    const mountPath = path.join(h.tmp, 'missing-parent', 'orphan');
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id, mountPath }]);
    const err = await mountError(new MemoryMounter({ client, logger: captureLogger().logger }).mount(session));
    expect(err.path).toBe(mountPath);
    expect(err.message).toContain(`mkdir -p ${path.dirname(mountPath)} && chown`);
    expect(fs.existsSync(path.dirname(mountPath))).toBe(false);
  });

  it.skipIf(process.getuid?.() === 0)('refuses an unwritable parent', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Locked', memories: { '/a.md': 'a' } });
    const parent = path.join(h.tmp, 'locked');
    await fsp.mkdir(parent, { mode: 0o555 });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id, mountPath: path.join(parent, 'locked') }]);
    const err = await mountError(new MemoryMounter({ client, logger: captureLogger().logger }).mount(session));
    expect(err.message).toMatch(/not writable by this process .*chown/);
    await fsp.chmod(parent, 0o755);
  });

  it.each([
    { description: 'a ".." segment', mountPath: (mnt: string) => `${mnt}/../escape` },
    { description: 'a "." segment', mountPath: (mnt: string) => `${mnt}/./here` },
    { description: 'an empty segment', mountPath: (mnt: string) => `${mnt}//double` },
    { description: 'a NUL byte', mountPath: (mnt: string) => `${mnt}/nul\u0000name` },
    { description: 'a relative path', mountPath: () => 'relative/store' },
  ])('refuses a mount_path with $description, naming the store, the path and the fix, and creates nothing', async ({ mountPath }) => {
    const store = await h.emu.createMemoryStore({ name: 'Unclean', memories: { '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const given = mountPath(h.mountRoot);
    const resources = session.resources.map((res) => ({ ...res, mount_path: given }));
    const mark = h.emu.requests.length;
    const err = await mountError(new MemoryMounter({ client, logger: captureLogger().logger }).mount({ ...session, resources }));
    expect(err.storeId).toBe(store.id);
    expect(err.path).toBe(given);
    expect(err.message).toContain(store.id);
    expect(err.message).toContain(JSON.stringify(given).slice(1, -1));
    expect(err.message).toContain('Attach the store at a clean absolute mount_path');
    expect(await fsp.readdir(h.mountRoot)).toEqual([]);
    expect(fs.existsSync(path.join(h.tmp, 'escape'))).toBe(false);
    expect(h.emu.requests.slice(mark).filter((x) => x.route.includes('memories'))).toEqual([]);
  });

  it('refuses two stores on one path and a store inside another', async () => {
    const a = await h.emu.createMemoryStore({ name: 'Same', memories: { '/a.md': 'a' } });
    const b = await h.emu.createMemoryStore({ name: 'Same', memories: { '/b.md': 'b' } });
    const one = await openSession(h.emu, [{ memoryStoreId: a.id }, { memoryStoreId: b.id }]);
    const err = await mountError(new MemoryMounter({ client: one.client, logger: captureLogger().logger }).mount(one.session));
    expect(err.message).toContain('are both attached at');
    const outer = path.join(h.mountRoot, 'outer');
    const two = await openSession(h.emu, [
      { memoryStoreId: a.id, mountPath: outer },
      { memoryStoreId: b.id, mountPath: path.join(outer, 'inner') },
    ]);
    const err2 = await mountError(new MemoryMounter({ client: two.client, logger: captureLogger().logger }).mount(two.session));
    expect(err2.message).toContain('inside the folder of store');
    expect(await fsp.readdir(h.mountRoot)).toEqual([]);
  });

  it('removes every folder it created when one store fails mid-download', async () => {
    const good = await h.emu.createMemoryStore({ name: 'Good', memories: { '/a.md': 'a' } });
    const bad = await h.emu.createMemoryStore({ name: 'Bad', memories: { '/b.md': 'b' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: good.id }, { memoryStoreId: bad.id }]);
    h.emu.faults.add({ route: new RegExp(`${bad.id}/memories`), status: 403 });
    const err = await mountError(new MemoryMounter({ client, logger: captureLogger().logger }).mount(session));
    expect(err.storeId).toBe(bad.id);
    expect(await fsp.readdir(h.mountRoot)).toEqual([]);
  });
});

describe('the journal entry', () => {
  it('is written before any file: a state folder it cannot be written in fails the mount naming it, with no file written and the folder removed', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Journal', memories: { '/a.md': 'a', '/sub/b.md': 'b' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const parent = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-state-'));
    try {
      const blocker = path.join(parent, 'a-file');
      await fsp.writeFile(blocker, 'not a folder');
      const stateDir = path.join(blocker, 'state');
      const err = await mountError(new MemoryMounter({ client, logger: captureLogger().logger, stateDir }).mount(session));
      expect(err.storeId).toBe(store.id);
      expect(err.message).toContain('could not write its journal entry');
      expect(err.message).toContain(stateDir);
      expect(await fsp.readdir(h.mountRoot)).toEqual([]);
    } finally {
      await fsp.rm(parent, { recursive: true, force: true });
    }
  });
});

describe('aborting', () => {
  it('cancels a mount in progress and removes what it created', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Slow', memories: { '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    h.emu.faults.add({ route: /memories/, hang: true });
    const ctrl = new AbortController();
    setTimeout(() => ctrl.abort(new Error('worker stopping')), 150);
    await expect(new MemoryMounter({ client, logger: captureLogger().logger }).mount(session, { signal: ctrl.signal })).rejects.toThrow();
    expect(await fsp.readdir(h.mountRoot)).toEqual([]);
  });
});

describe('an already aborted signal', () => {
  it('mounts nothing, sends no memory request and creates no folder', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Never', memories: { '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const mark = h.emu.requests.length;
    const signal = AbortSignal.abort(new Error('worker already stopping'));
    await expect(new MemoryMounter({ client, logger: captureLogger().logger }).mount(session, { signal })).rejects.toThrow(
      /worker already stopping/,
    );
    expect(h.emu.requests.slice(mark).filter((x) => x.route.includes('memories'))).toEqual([]);
    expect(await fsp.readdir(h.mountRoot)).toEqual([]);
  });
});

describe('unmounting', () => {
  it('keeps a folder whose marker was altered while it holds files, and says so', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Foreign', memories: { '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const log = captureLogger();
    const mounted = await new MemoryMounter({ client, logger: log.logger }).mount(session);
    const root = mounted.roots[0]!;
    await fsp.writeFile(path.join(root, '.anthropic-memory-store'), 'version 1\nmemstore_someone_else');
    await mounted.unmount();
    expect(fs.existsSync(path.join(root, 'a.md'))).toBe(true);
    expect(log.warnings().some((w) => w.includes('altered'))).toBe(true);
  });

  it('keeps a folder whose marker was removed while it holds files, and removes one whose marker is intact', async () => {
    const a = await h.emu.createMemoryStore({ name: 'Unmarked', memories: { '/a.md': 'a' } });
    const b = await h.emu.createMemoryStore({ name: 'Intact', memories: { '/b.md': 'b' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: a.id }, { memoryStoreId: b.id }]);
    const log = captureLogger();
    const mounted = await new MemoryMounter({ client, logger: log.logger }).mount(session);
    const [unmarked, intact] = mounted.roots as [string, string];
    await fsp.rm(path.join(unmarked, '.anthropic-memory-store'));
    await mounted.unmount();
    expect(await readTree(unmarked)).toEqual({ 'a.md': 'a' });
    expect(fs.existsSync(intact)).toBe(false);
    expect(log.lines.some((l) => l.level >= 40 && l.msg.includes('missing') && l.msg.includes(unmarked))).toBe(true);
  });
});
