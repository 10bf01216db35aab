/**
 * Pins what the end of a session does with files that differ from the store, and how a sync treats
 * entries it cannot read, with the real SDK client, the emulator and real folders:
 * - one entry the worker cannot read (here a tree deeper than PATH_MAX) is skipped with one warning
 *   naming it and the fix; the rest of the store keeps syncing; at the end the folder is kept,
 *   since that entry could not be copied out, and the finish report names it;
 * - a FIFO where a memory was is skipped and warned, never taken for a deletion;
 * - files refused for upload (binary, oversized, our reserved temp names) and read-only edits are
 *   copied to `<stateDir>/unsaved/…` before the folder is removed, and the finish report counts them;
 * - that check uses the scan of a flush that found nothing to upload, rather than a third one.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMounter, SyncLoop } from '../../../src/memory/index.js';
import { captureLogger, harness, manualClock, openSession, readTree, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  // A tree deeper than PATH_MAX is beyond fs.rm: GNU rm walks it relative to each folder.
  spawnSync('rm', ['-rf', h.tmp]);
  await h.cleanup();
});

async function rig(memories: Record<string, string>, access: 'read_write' | 'read_only' = 'read_write') {
  const store = await h.emu.createMemoryStore({ name: 'Notes', memories });
  const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id, access }]);
  const log = captureLogger();
  const mounted = await new MemoryMounter({ client, logger: log.logger, stateDir: h.stateDir }).mount(session);
  const loop = new SyncLoop({ client, mounted, logger: log.logger, stateDir: h.stateDir, clock: manualClock(), deleteAfterMs: 0 });
  const root = mounted.roots[0]!;
  return { storeId: store.id, root, loop, log, mounted, file: (rel: string) => path.join(root, rel) };
}

/** Build `<root>/<first>/…` deeper than PATH_MAX, with a file at the bottom (bash cd's relatively). */
function deepTree(root: string, first: string): void {
  const seg = 'd'.repeat(200);
  const script = `cd "$1" && mkdir "$2" && cd "$2" && for i in $(seq 1 25); do mkdir ${seg} && cd ${seg}; done && echo deep > bottom.md`;
  const r = spawnSync('bash', ['-c', script, 'bash', root, first]);
  expect(r.status).toBe(0);
}

describe('an entry the worker cannot read', () => {
  it('is skipped with one warning naming it; the other edits sync; the folder is kept at the end', async () => {
    const r = await rig({ '/a.md': 'a', '/b.md': 'b' });
    deepTree(r.root, 'deep');
    await fsp.writeFile(r.file('a.md'), 'edited next to an unreadable tree');
    const first = await r.loop.syncNow();
    expect(first.errors).toBe(0);
    expect(first.uploads).toBe(1);
    await r.loop.syncNow();
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'edited next to an unreadable tree', '/b.md': 'b' });
    const skips = r.log.lines.filter((l) => /^skipped/.test(l.msg));
    expect(skips).toHaveLength(1);
    // The scan walks pinned folders, so the tree's length never overflows a path: it stops where a
    // memory path cannot reach (20 segments) and reports that folder.
    expect(skips[0]).toMatchObject({
      kind: 'too-deep',
      memory_store_id: r.storeId,
      fix: expect.stringMatching(/closer to the store root/),
    });
    expect(String(skips[0]!['path'])).toMatch(/^deep\//);

    await fsp.writeFile(r.file('b.md'), 'edited at the very end');
    const end = await r.loop.finish({ clean: true });
    expect(h.emu.memories(r.storeId)['/b.md']).toBe('edited at the very end');
    expect(end.uncopied).toHaveLength(1);
    expect(end.kept).toEqual([r.root]);
    expect(fs.existsSync(r.file('deep'))).toBe(true);
  });
});

describe('a FIFO where a memory was', () => {
  it('is never taken for a deletion (the memory stays in the store), and is warned once', async () => {
    const r = await rig({ '/a.md': 'a', '/b.md': 'b' });
    await fsp.rm(r.file('a.md'));
    expect(spawnSync('mkfifo', [r.file('a.md')]).status).toBe(0);
    for (let i = 0; i < 3; i++) expect((await r.loop.syncNow()).deletes).toBe(0);
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'a', '/b.md': 'b' });
    const skips = r.log.lines.filter((l) => /^skipped/.test(l.msg));
    expect(skips).toHaveLength(1);
    expect(skips[0]).toMatchObject({ path: 'a.md', kind: 'fifo', fix: expect.stringMatching(/replace .*a\.md with a regular file/) });
    const end = await r.loop.finish({ clean: true });
    expect(end.final?.deletes).toBe(0);
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'a', '/b.md': 'b' });
  });
});

describe('files that differ from the store at the end', () => {
  it('refused files (binary, oversized, reserved temp names) are copied out and counted before the folder goes', async () => {
    const r = await rig({ '/a.md': 'a' });
    const binary = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x81]);
    const big = 'x'.repeat(200_000);
    await fsp.writeFile(r.file('image.bin'), binary);
    await fsp.writeFile(r.file('big.md'), big);
    await fsp.writeFile(r.file('.maw-tmp-agent-notes'), 'the agent named it so');
    await r.loop.syncNow();
    expect(Object.keys(h.emu.memories(r.storeId))).toEqual(['/a.md']);
    const end = await r.loop.finish({ clean: true });
    expect(end.removed).toEqual([r.root]);
    expect(end.pendingUploads).toBe(0);
    expect(end.unsavedCopies).toHaveLength(3);
    const copies = await readTree(path.join(h.stateDir, 'unsaved'));
    const byName = Object.fromEntries(Object.entries(copies).map(([k, v]) => [path.basename(k), v]));
    expect(byName['big.md']).toBe(big);
    expect(byName['.maw-tmp-agent-notes']).toBe('the agent named it so');
    expect(Buffer.from(await fsp.readFile(end.unsavedCopies.find((c) => c.endsWith('image.bin'))!)).equals(binary)).toBe(true);
    for (const c of end.unsavedCopies) expect((await fsp.stat(c)).mode & 0o077).toBe(0);
    expect(r.log.warnings().some((m) => /3 file\(s\) differ from the store at the end/.test(m))).toBe(true);
  });

  it('an edit in a read-only store is copied out before its folder goes', async () => {
    const r = await rig({ '/a.md': 'a' }, 'read_only');
    await fsp.writeFile(r.file('a.md'), 'edited by bash in a read-only store');
    const end = await r.loop.finish({ clean: true });
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'a' });
    expect(end.unsavedCopies).toHaveLength(1);
    expect(await fsp.readFile(end.unsavedCopies[0]!, 'utf8')).toBe('edited by bash in a read-only store');
    expect(end.removed).toEqual([r.root]);
  });
});

describe('deletions the final sync could not send', () => {
  it('are carried into the next session of the store, which sends them before its download', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'a', '/b.md': 'b', '/c.md': 'c' } });
    const first = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const log = captureLogger();
    const mounted = await new MemoryMounter({ client: first.client, logger: log.logger, stateDir: h.stateDir }).mount(first.session);
    const loop = new SyncLoop({ client: first.client, mounted, logger: log.logger, stateDir: h.stateDir, finalFlushMs: 1_000 });
    await fsp.rm(path.join(mounted.roots[0]!, 'a.md'));
    await fsp.rm(path.join(mounted.roots[0]!, 'b.md'));
    const hang = h.emu.faults.add({ method: 'DELETE', hang: true });
    const end = await loop.finish({ clean: true });
    hang.remove();
    expect(end.cutOff).toBe(true);
    expect(Object.keys(h.emu.memories(store.id)).sort()).toEqual(['/a.md', '/b.md', '/c.md']);
    expect(
      log.warnings().some((m) => /2 local deletion\(s\) not sent before the end; the next session of this store sends them first/.test(m)),
    ).toBe(true);

    // Meanwhile b.md changes in the Console: its carried deletion must not go through.
    h.emu.putMemory(store.id, '/b.md', 'b changed in the Console');
    const next = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const again = await new MemoryMounter({ client: next.client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(
      next.session,
    );
    expect(h.emu.memories(store.id)).toEqual({ '/b.md': 'b changed in the Console', '/c.md': 'c' });
    expect(await readTree(again.roots[0]!)).toEqual({ 'b.md': 'b changed in the Console', 'c.md': 'c' });
    await again.unmount();
    // Sent once: a third session finds nothing carried.
    expect(fs.readdirSync(path.join(h.stateDir, 'carried-deletes'))).toEqual([]);
  });
});

describe('the check for unsaved files at the end', () => {
  it('uses the scan of a flush that found nothing to upload instead of reading the folder a third time', async () => {
    const r = await rig({ '/a.md': 'a', '/b.md': 'b' });
    for (let i = 0; i < 5; i++) await fsp.writeFile(r.file(`new-${i}.md`), `new ${i}`);
    await fsp.writeFile(r.file('bin.dat'), Buffer.from([0xff, 0xfe, 0x00]));
    const cache = r.mounted.stores[0]!.cache;
    const lookups = (): number => cache.stats().hits + cache.stats().misses;
    const before = lookups();
    const end = await r.loop.finish({ clean: true });
    // Eight files, each looked up by the final sync's scan and the flush's, and no third time.
    expect(lookups() - before).toBe(2 * 8);
    expect(Object.keys(h.emu.memories(r.storeId)).sort()).toEqual([
      '/a.md',
      '/b.md',
      '/new-0.md',
      '/new-1.md',
      '/new-2.md',
      '/new-3.md',
      '/new-4.md',
    ]);
    // What differs from the store is still found and copied out.
    expect(end.unsavedCopies).toHaveLength(1);
    expect(end.unsavedCopies[0]).toMatch(/bin\.dat$/);
    expect(end.removed).toEqual([r.root]);
  });
});
