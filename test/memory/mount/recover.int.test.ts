/**
 * Pins the leftover sweep at `run()` start and `managed-agents-worker recover`, with the real SDK
 * client, the emulator and real folders (a dead owner is simulated with an exited child's pid):
 * - the sweep drops entries whose folder is gone or empty (with the empty folder) or was still
 *   downloading at the crash (with the folder: nothing in it is an edit), names each
 *   leftover holding files in one line that mentions `recover`, and never touches a live owner's;
 * - `recover --dry-run` says what it would do and changes nothing, with or without an API key;
 * - `recover` uploads the dead session's edits, keeps a conflict's local bytes and refused files
 *   as copies, deletes only a deletion an earlier sync saw, removes the folder and its entry, and
 *   prints one line per folder; without an API key it exits 3.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../../../src/cli/cli.js';
import { commands } from '../../../src/cli/commands.js';
import { EXIT } from '../../../src/cli/exit-codes.js';
import type { CliIo } from '../../../src/cli/io.js';
import { MemoryMounter, SyncLoop } from '../../../src/memory/index.js';
import { Journal } from '../../../src/memory/journal/journal.js';
import { sweepJournal } from '../../../src/memory/journal/sweep.js';
import { recoverLeftovers } from '../../../src/memory/mount/recovery.js';
import { captureLogger, harness, manualClock, openSession, readTree, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

async function killOwner(root: string): Promise<void> {
  const file = new Journal(h.stateDir).fileFor(root);
  const entry = JSON.parse(await fsp.readFile(file, 'utf8')) as { owner: unknown };
  entry.owner = { pid: spawnSync('true').pid! };
  await fsp.writeFile(file, JSON.stringify(entry));
}

/** Mount a store, let `before` act on the folder (and the loop), then "crash": no unmount. */
async function crashedMount(
  name: string,
  memories: Record<string, string>,
  before: (root: string, loop: SyncLoop) => Promise<void> = async () => {},
) {
  const store = await h.emu.createMemoryStore({ name, memories });
  const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
  const { logger } = captureLogger();
  const mounted = await new MemoryMounter({ client, logger, stateDir: h.stateDir }).mount(session);
  const root = mounted.roots[0]!;
  const loop = new SyncLoop({ client, mounted, logger, stateDir: h.stateDir, clock: manualClock(), deleteAfterMs: 0 });
  await before(root, loop);
  await killOwner(root);
  return { storeId: store.id, root };
}

function io(env: NodeJS.ProcessEnv): CliIo & { out: string; err: string } {
  const o = {
    out: '',
    err: '',
    env,
    cwd: process.cwd(),
    stdout: (t: string) => void (o.out += t),
    stderr: (t: string) => void (o.err += t),
  };
  return o;
}

describe('the sweep at start', () => {
  it('drops entries with nothing to save (a download cut short included), names the leftovers that hold files, and leaves a live owner alone', async () => {
    const gone = await crashedMount('Gone', { '/a.md': 'a' });
    await fsp.rm(gone.root, { recursive: true });
    const empty = await crashedMount('Empty', {});
    const full = await crashedMount('Full', { '/a.md': 'a' }, async (root) => fsp.writeFile(path.join(root, 'a.md'), 'edited'));
    // Killed while downloading: the entry as it is until the last file is written, one file torn.
    const downloading = await crashedMount('Downloading', { '/a.md': 'aaaa', '/b.md': 'b' });
    const file = new Journal(h.stateDir).fileFor(downloading.root);
    const entry = JSON.parse(await fsp.readFile(file, 'utf8')) as { downloading?: boolean; state: { baseline: object } };
    entry.downloading = true;
    entry.state.baseline = {};
    await fsp.writeFile(file, JSON.stringify(entry));
    await fsp.truncate(path.join(downloading.root, 'a.md'), 2);
    const live = await h.emu.createMemoryStore({ name: 'Live', memories: { '/x.md': 'x' } });
    const opened = await openSession(h.emu, [{ memoryStoreId: live.id }]);
    const liveMount = await new MemoryMounter({ client: opened.client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(
      opened.session,
    );

    const cap = captureLogger();
    const waiting = await sweepJournal({ stateDir: h.stateDir, logger: cap.logger });
    expect(waiting).toEqual([full.root]);
    const journal = new Journal(h.stateDir);
    expect(await journal.read(gone.root)).toBeUndefined();
    expect(await journal.read(empty.root)).toBeUndefined();
    expect(fs.existsSync(empty.root)).toBe(false);
    expect(await journal.read(downloading.root)).toBeUndefined();
    expect(fs.existsSync(downloading.root)).toBe(false);
    expect(await journal.read(full.root)).toMatchObject({ storeId: full.storeId });
    expect(await readTree(full.root)).toEqual({ 'a.md': 'edited' });
    expect(await journal.read(liveMount.roots[0]!)).toMatchObject({ storeId: live.id });
    const lines = cap.lines.filter((l) => /leftover memory folder/.test(l.msg));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ root: full.root, memory_store_id: full.storeId });
    expect(lines[0]!.msg).toMatch(/managed-agents-worker recover/);
    await liveMount.unmount();
  });
});

describe('recover', () => {
  async function leftover() {
    return crashedMount('Notes', { '/a.md': 'a', '/b.md': 'b', '/c.md': 'c', '/d.md': 'd', '/e.md': 'e' }, async (root, loop) => {
      // d.md deleted and seen gone by a sync before the crash: a corroborated deletion.
      await fsp.rm(path.join(root, 'd.md'));
      await loop.syncNow();
      // After the last sync: an edit, a new file, a binary file, an edit the Console also makes,
      // and a deletion no sync saw.
      await fsp.writeFile(path.join(root, 'a.md'), 'edited before the crash');
      await fsp.writeFile(path.join(root, 'new.md'), 'new before the crash');
      await fsp.writeFile(path.join(root, 'blob.bin'), Buffer.from([0xff, 0x00, 0xfe]));
      await fsp.writeFile(path.join(root, 'c.md'), 'agent c');
      await fsp.rm(path.join(root, 'e.md'));
    });
  }

  it('--dry-run prints what it would do and changes nothing', async () => {
    const l = await leftover();
    h.emu.putMemory(l.storeId, '/c.md', 'console c');
    const before = await readTree(l.root);
    const o = io({ ANTHROPIC_API_KEY: h.emu.apiKey, ANTHROPIC_BASE_URL: h.emu.baseURL });
    expect(await runCli(['recover', '--state-dir', h.stateDir, '--dry-run', '--log-level', 'silent'], o, commands())).toBe(EXIT.OK);
    expect(o.out).toBe(`${l.root}: would upload 2, keep as copy 2, delete 1, then remove (dry run: nothing done)\n`);
    expect(await readTree(l.root)).toEqual(before);
    expect(h.emu.memories(l.storeId)).toEqual({ '/a.md': 'a', '/b.md': 'b', '/c.md': 'console c', '/d.md': 'd', '/e.md': 'e' });
  });

  it('--dry-run without an API key lists the leftover from the state folder alone; without --dry-run the key is still required', async () => {
    const l = await leftover();
    const before = await readTree(l.root);
    h.emu.clearRequests();
    const o = io({ ANTHROPIC_BASE_URL: h.emu.baseURL });
    expect(await runCli(['recover', '--state-dir', h.stateDir, '--dry-run', '--log-level', 'silent'], o, commands())).toBe(EXIT.OK);
    // Against the journal's baseline: c.md is an edit to upload here (the Console edit is not seen).
    expect(o.out).toBe(
      `${l.root}: would upload 3, keep as copy 1, delete 1, then remove (dry run without an API key: the store was not read, so edits made there since the last sync are not counted; nothing done)\n`,
    );
    expect(h.emu.requests).toEqual([]);
    expect(await readTree(l.root)).toEqual(before);
    const refused = io({ ANTHROPIC_BASE_URL: h.emu.baseURL });
    expect(await runCli(['recover', '--state-dir', h.stateDir, '--log-level', 'silent'], refused, commands())).toBe(EXIT.CONFIG);
    expect(refused.err).toContain('recover needs an API key');
    expect(refused.err).toContain('--dry-run lists the leftovers without one');
    expect(await readTree(l.root)).toEqual(before);
  });

  it('saves the edits, keeps copies, deletes only a corroborated deletion, removes the folder and prints one line', async () => {
    const l = await leftover();
    h.emu.putMemory(l.storeId, '/c.md', 'console c');
    const o = io({ ANTHROPIC_API_KEY: h.emu.apiKey, ANTHROPIC_BASE_URL: h.emu.baseURL });
    expect(await runCli(['recover', '--state-dir', h.stateDir, '--log-level', 'silent'], o, commands())).toBe(EXIT.OK);
    expect(o.out).toBe(`${l.root}: uploaded 2, kept as copy 2, deleted 1; removed (copies in ${h.stateDir})\n`);
    expect(h.emu.memories(l.storeId)).toEqual({
      '/a.md': 'edited before the crash',
      '/b.md': 'b',
      '/c.md': 'console c',
      '/e.md': 'e',
      '/new.md': 'new before the crash',
    });
    expect(fs.existsSync(l.root)).toBe(false);
    expect(await new Journal(h.stateDir).read(l.root)).toBeUndefined();
    // The content cache holds store contents only, beside the copies.
    const copies = Object.entries(await readTree(h.stateDir)).filter(([k]) => !k.startsWith('journal/') && !k.startsWith('content-cache/'));
    expect(copies.map(([k, v]) => `${path.basename(k)}=${v.length}`).sort()).toEqual(['blob.bin=3', 'c.md=7']);
    // A second run finds nothing left.
    const again = io({ ANTHROPIC_API_KEY: h.emu.apiKey, ANTHROPIC_BASE_URL: h.emu.baseURL });
    expect(await runCli(['recover', '--state-dir', h.stateDir, '--log-level', 'silent'], again, commands())).toBe(EXIT.OK);
    expect(again.out).toBe('no leftover folder of a worker that is gone\n');
  });

  it('never touches the folder of a worker that still runs', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Busy', memories: { '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const mounted = await new MemoryMounter({ client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(session);
    await fsp.writeFile(path.join(mounted.roots[0]!, 'a.md'), 'in progress');
    const lines = await recoverLeftovers({ client: h.emu.client(), stateDir: h.stateDir, logger: captureLogger().logger });
    expect(lines).toEqual([]);
    expect(h.emu.memories(store.id)).toEqual({ '/a.md': 'a' });
    await mounted.unmount();
  });

  it('exits 3 without an API key, naming the variable', async () => {
    const o = io({});
    expect(await runCli(['recover', '--state-dir', h.stateDir], o, commands())).toBe(EXIT.CONFIG);
    expect(o.err).toMatch(/ANTHROPIC_API_KEY/);
  });
});

describe('recover while the store cannot be reached', () => {
  it('keeps the folder and its entry for a later run, which then saves the edit', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Far', memories: { '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const mounted = await new MemoryMounter({ client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(session);
    const root = mounted.roots[0]!;
    await fsp.writeFile(path.join(root, 'a.md'), 'edited before the crash');
    await killOwner(root);
    const down = h.emu.faults.add({ route: /memories/, status: 503 });
    const first = await recoverLeftovers({ client: h.emu.client({ maxRetries: 0 }), stateDir: h.stateDir, logger: captureLogger().logger });
    expect(first).toHaveLength(1);
    expect(first[0]!.removed).toBe(false);
    expect(first[0]!.text).toMatch(/kept: the store could not be reached for all of it; run recover again/);
    expect(await readTree(root)).toEqual({ 'a.md': 'edited before the crash' });
    down.remove();
    const second = await recoverLeftovers({ client: h.emu.client(), stateDir: h.stateDir, logger: captureLogger().logger });
    expect(second.map((l) => l.removed)).toEqual([true]);
    expect(h.emu.memories(store.id)).toEqual({ '/a.md': 'edited before the crash' });
    expect(fs.existsSync(root)).toBe(false);
  });
});
