/**
 * Pins the SyncLoop's per-path rules against the emulator (real SDK client, real files): local
 * edits upload byte for byte and are never re-sent; Console edits come down; both changed → the
 * store wins and the local bytes are kept as a conflict copy outside the mount; deletions in
 * the three modes; remote deletes; read-only stores never upload; a missing or altered
 * marker stops the store's sync and a folder wiped whole is downloaded again; symlinks,
 * FIFOs, temp files, binary and oversized files are never uploaded and refusals are reported once;
 * a lost upload response is settled by sha (no duplicate, no false conflict); 503 bursts only
 * delay the sync.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import type Anthropic from '@anthropic-ai/sdk';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryMounter, SyncLoop, type MemoryDeleteMode, type MountedSession } from '../../../src/memory/index.js';
import { LocalDir, MAX_MEMORY_BYTES } from '../../../src/memory/disk/local-dir.js';
import { captureLogger, harness, manualClock, openSession, readTree, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

interface Rig {
  storeId: string;
  sessionId: string;
  root: string;
  client: Anthropic;
  mounted: MountedSession;
  loop: SyncLoop;
  log: ReturnType<typeof captureLogger>;
  file: (rel: string) => string;
  clock: ReturnType<typeof manualClock>;
}

async function rig(
  memories: Record<string, string>,
  opts: { access?: 'read_write' | 'read_only'; deletions?: MemoryDeleteMode; name?: string; deleteAfterMs?: number } = {},
): Promise<Rig> {
  const store = await h.emu.createMemoryStore({ name: opts.name ?? 'Notes', memories });
  const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id, ...(opts.access ? { access: opts.access } : {}) }]);
  const log = captureLogger();
  const mounted = await new MemoryMounter({ client, logger: log.logger, stateDir: h.stateDir }).mount(session);
  const clock = manualClock();
  const loop = new SyncLoop({
    client,
    mounted,
    logger: log.logger,
    stateDir: h.stateDir,
    clock,
    // Most tests here pin other rules: a delete confirmed by a later sync goes out at once.
    deleteAfterMs: opts.deleteAfterMs ?? 0,
    ...(opts.deletions ? { deletions: opts.deletions } : {}),
  });
  const root = mounted.roots[0]!;
  return { storeId: store.id, sessionId: session.id, root, client, mounted, loop, log, file: (rel) => path.join(root, rel), clock };
}

function requestsSince(mark: number): string[] {
  return h.emu.requests.slice(mark).map((r) => r.route);
}

describe('uploads and downloads', () => {
  it('uploads a local edit byte for byte and never uploads an unchanged file again', async () => {
    const r = await rig({ '/a.md': 'old', '/b.md': 'b' });
    const content = 'new ✓ content\r\nwith CRLF and a BOM \uFEFF and trailing spaces   \n';
    await fsp.writeFile(r.file('a.md'), content);
    await fsp.mkdir(r.file('deep/er'), { recursive: true });
    await fsp.writeFile(r.file('deep/er/new.md'), 'created by the agent');
    const report = await r.loop.syncNow();
    expect(report).toMatchObject({ uploads: 2, downloads: 0, errors: 0 });
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': content, '/b.md': 'b', '/deep/er/new.md': 'created by the agent' });
    const mark = h.emu.requests.length;
    const again = await r.loop.syncNow();
    expect(again).toMatchObject({ uploads: 0, downloads: 0 });
    expect(requestsSince(mark)).toEqual(['GET /v1/memory_stores/:id/memories']);
  });

  it('uploads many new files in a routine sync once each, keeps them on disk, and the next sync sends nothing', async () => {
    const r = await rig({ '/a.md': 'a', '/topic/b.md': 'b' });
    const expected: Record<string, string> = { '/a.md': 'a', '/topic/b.md': 'b', ...(await writeNewFiles(r.file, 300)) };
    // Beside a listed memory, in its folder: qualifies for an early upload like the others.
    await fsp.writeFile(r.file('topic/c.md'), 'c');
    expected['/topic/c.md'] = 'c';
    const mark = h.emu.requests.length;
    const report = await r.loop.syncNow();
    expect(report).toMatchObject({ uploads: 301, errors: 0, downloads: 0, localDeletes: 0 });
    expect(h.emu.memories(r.storeId)).toEqual(expected);
    expect(requestsSince(mark).filter((route) => route === 'POST /v1/memory_stores/:id/memories')).toHaveLength(301);
    expect(Object.keys(await readTree(r.root))).toHaveLength(303);
    const again = h.emu.requests.length;
    expect(await r.loop.syncNow()).toMatchObject({ uploads: 0, downloads: 0, localDeletes: 0, deletes: 0 });
    expect(requestsSince(again)).toEqual([
      'GET /v1/memory_stores/:id/memories',
      'GET /v1/memory_stores/:id/memories',
      'GET /v1/memory_stores/:id/memories',
      'GET /v1/memory_stores/:id/memories',
    ]);
  });

  it('at the end, uploads many new files once each (most while the final scan runs) and removes the folder with nothing left unsaved', async () => {
    const r = await rig({ '/a.md': 'a', '/topic/b.md': 'b' });
    const expected: Record<string, string> = { '/a.md': 'a', '/topic/b.md': 'b', ...(await writeNewFiles(r.file, 300)) };
    // Named like a listed file plus a suffix, so beside it, not below it: it goes like the others.
    await fsp.mkdir(r.file('a.md.d'), { recursive: true });
    await fsp.writeFile(r.file('a.md.d/x.md'), 'beside, not below');
    expected['/a.md.d/x.md'] = 'beside, not below';
    const mark = h.emu.requests.length;
    const end = await r.loop.finish({ clean: true });
    expect(end).toMatchObject({ cutOff: false, pendingUploads: 0, unsavedCopies: [], removed: [r.root] });
    expect(end.final).toMatchObject({ uploads: 301, errors: 0, downloads: 0, localDeletes: 0, deletes: 0 });
    expect(end.flush).toMatchObject({ uploads: 0, errors: 0 });
    expect(h.emu.memories(r.storeId)).toEqual(expected);
    expect(requestsSince(mark).filter((route) => route === 'POST /v1/memory_stores/:id/memories')).toHaveLength(301);
  });

  it('writes a Console edit and a new nested memory to disk', async () => {
    const r = await rig({ '/a.md': 'old' });
    h.emu.putMemory(r.storeId, '/a.md', 'edited in the Console');
    h.emu.putMemory(r.storeId, '/x/y/z.md', 'new');
    const report = await r.loop.syncNow();
    expect(report).toMatchObject({ downloads: 2, uploads: 0 });
    expect(await readTree(r.root)).toEqual({ 'a.md': 'edited in the Console', 'x/y/z.md': 'new' });
  });

  it('emits uploaded, downloaded, deleted and synced, and logs each action through the store logger with memory_store_id and path', async () => {
    const r = await rig({ '/a.md': 'a', '/b.md': 'b', '/c.md': 'c', '/gone.md': 'g' });
    const events: Array<[string, Record<string, unknown>]> = [];
    for (const name of ['uploaded', 'downloaded', 'deleted', 'synced'] as const) {
      r.loop.on(name, (e: object) => events.push([name, e as Record<string, unknown>]));
    }
    await fsp.writeFile(r.file('a.md'), 'edited by the agent');
    await fsp.rm(r.file('b.md'));
    h.emu.putMemory(r.storeId, '/c.md', 'edited in the Console');
    h.emu.removeMemory(r.storeId, '/gone.md');
    await r.loop.syncNow();
    await r.loop.syncNow(); // confirms the local deletion of b.md
    const of = (name: string): Array<Record<string, unknown>> => events.filter(([n]) => n === name).map(([, e]) => e);
    expect(of('uploaded')).toEqual([expect.objectContaining({ storeId: r.storeId, path: 'a.md', created: false })]);
    expect(of('downloaded')).toEqual([expect.objectContaining({ storeId: r.storeId, path: 'c.md' })]);
    expect(of('deleted')).toEqual([
      { storeId: r.storeId, path: 'gone.md', side: 'local' },
      { storeId: r.storeId, path: 'b.md', side: 'remote' },
    ]);
    const synced = of('synced');
    expect(synced.filter((e) => e['storeId'] === r.storeId)).toHaveLength(2);
    expect(synced.filter((e) => e['storeId'] === undefined)).toHaveLength(2);
    expect(synced[0]).toMatchObject({ storeId: r.storeId, phase: 'sync', report: { uploads: 1, downloads: 1, localDeletes: 1 } });
    for (const p of ['a.md', 'c.md', 'gone.md', 'b.md']) {
      const lines = r.log.lines.filter((l) => l['path'] === p);
      expect(lines.length, `a log line about ${p}`).toBeGreaterThan(0);
      expect(
        lines.every((l) => l['memory_store_id'] === r.storeId),
        `${p} logged with memory_store_id`,
      ).toBe(true);
    }
  });

  it('never uploads our own temp files', async () => {
    const r = await rig({ '/a.md': 'a' });
    await fsp.writeFile(r.file('.maw-tmp-deadbeef'), 'half written');
    await r.loop.syncNow();
    expect(Object.keys(h.emu.memories(r.storeId))).toEqual(['/a.md']);
  });
});

describe('conflicts', () => {
  it('lets the store win and keeps the local bytes as a conflict copy outside the mount', async () => {
    const r = await rig({ '/a.md': 'base' });
    await fsp.writeFile(r.file('a.md'), 'agent version');
    h.emu.putMemory(r.storeId, '/a.md', 'console version');
    const conflicts: Array<{ conflictCopy: string | undefined }> = [];
    r.loop.on('conflict', (e) => conflicts.push(e));
    const report = await r.loop.syncNow();
    expect(report).toMatchObject({ conflicts: 1, uploads: 0, errors: 0 });
    expect(await fsp.readFile(r.file('a.md'), 'utf8')).toBe('console version');
    expect(h.emu.memories(r.storeId)['/a.md']).toBe('console version');
    const copy = conflicts[0]?.conflictCopy;
    expect(copy).toBeDefined();
    expect(copy!.startsWith(path.join(h.stateDir, 'conflicts', r.storeId))).toBe(true);
    expect(await fsp.readFile(copy!, 'utf8')).toBe('agent version');
    expect(r.log.warnings().some((w) => w.includes(copy!))).toBe(true);
  });

  it('a push racing a Console edit costs one request and ends with the store version', async () => {
    const r = await rig({ '/a.md': 'base' });
    await fsp.writeFile(r.file('a.md'), 'agent version');
    // The Console edit lands after the listing, before the upload (held back 1 s by the
    // emulator): the content_sha256 precondition fails.
    h.emu.faults.add({ route: /^POST .*\/memories\//, times: 1, latencyMs: 1_000 });
    const mark = h.emu.requests.length;
    const logMark = r.log.lines.length;
    const syncing = r.loop.syncNow();
    // The listing runs beside the local scan: write only once both are done, so the edit lands
    // during the (slowed) pull and the scan never sees it.
    const listed = () => h.emu.requests.slice(mark).some((x) => x.route === 'GET /v1/memory_stores/:id/memories' && x.status === 200);
    const scanned = () => r.log.lines.slice(logMark).some((l) => l.msg === 'local scan done');
    while (!listed() || !scanned()) {
      await new Promise((res) => setTimeout(res, 5));
    }
    h.emu.putMemory(r.storeId, '/a.md', 'console version');
    const first = await syncing;
    expect(first.uploads).toBe(0);
    const posts = requestsSince(mark).filter((x) => x.startsWith('POST'));
    expect(posts).toEqual(['POST /v1/memory_stores/:id/memories/:memoryId']);
    await r.loop.syncNow();
    expect(await fsp.readFile(r.file('a.md'), 'utf8')).toBe('console version');
  });
});

describe('a deterministic 409 without x-should-retry: false', () => {
  it('costs one request for a conditional update and one for a conditional delete (the client must not retry it)', async () => {
    const r = await rig({ '/a.md': 'base', '/b.md': 'b' });
    await fsp.rm(r.file('b.md'));
    await r.loop.syncNow(); // sees b.md missing; the next sync deletes it
    await fsp.writeFile(r.file('a.md'), 'agent version');
    // The API's 409 for a failed precondition, but (unlike the emulator's own) without the header
    // that tells the SDK not to retry: only the per-request retry policy keeps it to one request.
    h.emu.faults.add({ route: /^(POST|DELETE) .*\/memories\/[^/]+$/, status: 409, errorType: 'memory_precondition_failed_error' });
    const mark = h.emu.requests.length;
    await r.loop.syncNow();
    const writes = h.emu.requests.slice(mark).filter((x) => x.method !== 'GET');
    expect(writes.map((x) => [x.route, x.status])).toEqual([
      ['DELETE /v1/memory_stores/:id/memories/:memoryId', 409],
      ['POST /v1/memory_stores/:id/memories/:memoryId', 409],
    ]);
  });
});

describe('an agent edit racing a pull of the same file', () => {
  /**
   * Start a sync whose content fetches are held back 1 s, and write `content` as soon as the
   * listing is answered (the emulator logs a request when it answers): the scan is over, the
   * fetch of `rel` is in flight.
   */
  async function editDuringPull(r: Rig, rel: string, content: string): Promise<Awaited<ReturnType<SyncLoop['syncNow']>>> {
    const fault = h.emu.faults.add({ route: /^GET .*\/memories\/[^/]+$/, latencyMs: 1_000 });
    const mark = h.emu.requests.length;
    const logMark = r.log.lines.length;
    const syncing = r.loop.syncNow();
    // The listing runs beside the local scan: write only once both are done, so the edit lands
    // during the (slowed) pull and the scan never sees it.
    const listed = () => h.emu.requests.slice(mark).some((x) => x.route === 'GET /v1/memory_stores/:id/memories' && x.status === 200);
    const scanned = () => r.log.lines.slice(logMark).some((l) => l.msg === 'local scan done');
    while (!listed() || !scanned()) {
      await new Promise((res) => setTimeout(res, 5));
    }
    await fsp.writeFile(r.file(rel), content);
    const report = await syncing;
    fault.remove();
    return report;
  }

  it('store changed: the store wins, and the agent bytes are kept as a conflict copy', async () => {
    const r = await rig({ '/a.md': 'base' });
    h.emu.putMemory(r.storeId, '/a.md', 'console version');
    const conflicts: Array<{ conflictCopy: string | undefined }> = [];
    r.loop.on('conflict', (e) => conflicts.push(e));
    const report = await editDuringPull(r, 'a.md', 'agent wrote during the pull');
    expect(report.conflicts).toBe(1);
    expect(await fsp.readFile(r.file('a.md'), 'utf8')).toBe('console version');
    expect(await fsp.readFile(conflicts[0]!.conflictCopy!, 'utf8')).toBe('agent wrote during the pull');
  });

  it('store unchanged (folder emptied, then re-downloaded): the agent edit wins and is uploaded', async () => {
    const r = await rig({ '/a.md': 'base a', '/b.md': 'base b' });
    await fsp.rm(r.file('a.md'));
    await fsp.rm(r.file('b.md'));
    await editDuringPull(r, 'a.md', 'agent rewrote a.md while it was being downloaded again');
    await r.loop.syncNow();
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'agent rewrote a.md while it was being downloaded again', '/b.md': 'base b' });
    expect(await readTree(r.root)).toEqual({ 'a.md': 'agent rewrote a.md while it was being downloaded again', 'b.md': 'base b' });
  });

  it('a file over the size limit written during the pull is never read whole: the store wins, its bytes are kept aside', async () => {
    const r = await rig({ '/a.md': 'base' });
    h.emu.putMemory(r.storeId, '/a.md', 'console version');
    const big = 'x'.repeat(MAX_MEMORY_BYTES * 4);
    // Every read of the hardened layer, with what it returned (the executor's own read helper).
    const reads: Array<{ rel: string; bytes: number }> = [];
    const realRead = LocalDir.prototype.readFile;
    const spy = vi.spyOn(LocalDir.prototype, 'readFile').mockImplementation(async function (
      this: LocalDir,
      rel: string,
      maxBytes?: number,
    ) {
      const out = await realRead.call(this, rel, maxBytes);
      reads.push({ rel, bytes: out.bytes.length });
      return out;
    });
    const conflicts: Array<{ conflictCopy: string | undefined }> = [];
    r.loop.on('conflict', (e) => conflicts.push(e));
    let report;
    try {
      report = await editDuringPull(r, 'a.md', big);
      await r.loop.syncNow();
    } finally {
      spy.mockRestore();
    }
    expect(reads.filter((x) => x.bytes > MAX_MEMORY_BYTES)).toEqual([]);
    expect(report).toMatchObject({ conflicts: 1, uploads: 0 });
    expect(await fsp.readFile(r.file('a.md'), 'utf8')).toBe('console version');
    expect(await fsp.readFile(conflicts[0]!.conflictCopy!, 'utf8')).toBe(big);
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'console version' });
  });
});

describe('deletions', () => {
  it('enabled: deletes the memory only when a later sync confirms the file is still gone', async () => {
    const r = await rig({ '/a.md': 'a', '/b.md': 'b' });
    await fsp.rm(r.file('a.md'));
    const first = await r.loop.syncNow();
    expect(first.deletes).toBe(0);
    expect(h.emu.memories(r.storeId)).toHaveProperty('/a.md');
    const second = await r.loop.syncNow();
    expect(second.deletes).toBe(1);
    expect(h.emu.memories(r.storeId)).toEqual({ '/b.md': 'b' });
  });

  it('enabled, default memoryDeleteAfterMs: a file gone for a few seconds is never deleted, one gone 30 s is', async () => {
    const r = await rig({ '/a.md': 'a', '/b.md': 'b' }, { deleteAfterMs: 30_000 });
    // An editor's replace: gone at one sync, gone still 5 s later, back after that.
    await fsp.rename(r.file('a.md'), path.join(h.tmp, 'a.md.swap'));
    await r.loop.syncNow();
    r.clock.advance(5_000);
    expect((await r.loop.syncNow()).deletes).toBe(0);
    r.clock.advance(5_000);
    expect((await r.loop.syncNow()).deletes).toBe(0);
    expect(h.emu.memories(r.storeId)).toHaveProperty('/a.md', 'a');
    await fsp.rename(path.join(h.tmp, 'a.md.swap'), r.file('a.md'));
    await r.loop.syncNow();
    // Now really deleted: gone at one sync, confirmed by a sync 30 s later.
    await fsp.rm(r.file('b.md'));
    await r.loop.syncNow();
    r.clock.advance(29_000);
    expect((await r.loop.syncNow()).deletes).toBe(0);
    r.clock.advance(1_000);
    expect((await r.loop.syncNow()).deletes).toBe(1);
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'a' });
  });

  it('never deletes a memory whose file came back after the scan (checked again right before the request)', async () => {
    const r = await rig({ '/a.md': 'a', '/b.md': 'b' });
    await fsp.rm(r.file('a.md'));
    await r.loop.syncNow();
    // The confirming sync scans (a.md gone), then lists slowly; the file comes back meanwhile.
    const slow = h.emu.faults.add({ method: 'GET', route: /memories$|memories\?/, latencyMs: 400, times: 1 });
    const syncing = r.loop.syncNow();
    await new Promise((resolve) => setTimeout(resolve, 150));
    await fsp.writeFile(r.file('a.md'), 'a');
    const report = await syncing;
    slow.remove();
    expect(report.deletes).toBe(0);
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'a', '/b.md': 'b' });
  });

  it('the final sync sends every delete it confirms, beyond the per-sync cap (12 of 14 deleted in the last tool call)', async () => {
    const memories: Record<string, string> = {};
    for (let i = 0; i < 14; i++) memories[`/f${String(i).padStart(2, '0')}.md`] = `memory ${i}`;
    const r = await rig(memories, { deleteAfterMs: 30_000 });
    for (let i = 0; i < 12; i++) await fsp.rm(r.file(`f${String(i).padStart(2, '0')}.md`));
    const report = await r.loop.finish({ clean: true });
    expect(report.final?.deletes).toBe(12);
    expect(Object.keys(h.emu.memories(r.storeId)).sort()).toEqual(['/f12.md', '/f13.md']);
    expect(r.log.lines.some((l) => /later syncs/.test(l.msg))).toBe(false);
  });

  it('log_only: reports what it would delete and never deletes', async () => {
    const r = await rig({ '/a.md': 'a', '/b.md': 'b' }, { deletions: 'log_only' });
    const would: string[] = [];
    r.loop.on('wouldDelete', (e) => would.push(e.path));
    await fsp.rm(r.file('a.md'));
    for (let i = 0; i < 3; i++) await r.loop.syncNow();
    expect(would).toEqual(['a.md']);
    expect(h.emu.memories(r.storeId)).toHaveProperty('/a.md', 'a');
    expect(fs.existsSync(r.file('a.md'))).toBe(false);
  });

  it('disabled: never deletes and does not download the file again every sync', async () => {
    const r = await rig({ '/a.md': 'a', '/b.md': 'b' }, { deletions: 'disabled' });
    await fsp.rm(r.file('a.md'));
    let downloads = 0;
    for (let i = 0; i < 3; i++) downloads += (await r.loop.syncNow()).downloads;
    expect(h.emu.memories(r.storeId)).toHaveProperty('/a.md', 'a');
    expect(downloads).toBe(0);
  });

  it('removes the local file when the memory is deleted in the store, and re-creates an edited one', async () => {
    const r = await rig({ '/gone.md': 'x', '/edited.md': 'y', '/keep.md': 'z' });
    await fsp.writeFile(r.file('edited.md'), 'agent kept working on this');
    h.emu.removeMemory(r.storeId, '/gone.md');
    h.emu.removeMemory(r.storeId, '/edited.md');
    const report = await r.loop.syncNow();
    expect(report).toMatchObject({ localDeletes: 1, uploads: 1 });
    expect(fs.existsSync(r.file('gone.md'))).toBe(false);
    expect(h.emu.memories(r.storeId)).toEqual({ '/edited.md': 'agent kept working on this', '/keep.md': 'z' });
  });
});

describe('read-only stores', () => {
  it('never uploads, and the next remote change overwrites a local edit', async () => {
    const r = await rig({ '/a.md': 'a', '/b.md': 'b' }, { access: 'read_only' });
    await fsp.writeFile(r.file('a.md'), 'edited by bash');
    await fsp.writeFile(r.file('new.md'), 'created by bash');
    await fsp.rm(r.file('b.md'));
    const mark = h.emu.requests.length;
    await r.loop.syncNow();
    await r.loop.syncNow();
    expect(requestsSince(mark).every((x) => x.startsWith('GET'))).toBe(true);
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'a', '/b.md': 'b' });
    h.emu.putMemory(r.storeId, '/a.md', 'console update');
    await r.loop.syncNow();
    expect(await fsp.readFile(r.file('a.md'), 'utf8')).toBe('console update');
  });
});

describe('markers and wiped folders', () => {
  it('skips a store whose marker is missing or altered while files remain, then resumes when restored', async () => {
    const r = await rig({ '/a.md': 'a' });
    const marker = r.file('.anthropic-memory-store');
    await fsp.writeFile(marker, 'version 1\nmemstore_other');
    await fsp.writeFile(r.file('a.md'), 'edit while unbound');
    const skipped = await r.loop.syncNow();
    expect(skipped).toMatchObject({ skippedStores: 1, uploads: 0 });
    await fsp.rm(marker);
    expect((await r.loop.syncNow()).skippedStores).toBe(1);
    expect(h.emu.memories(r.storeId)['/a.md']).toBe('a');
    expect(r.log.warnings().filter((w) => w.includes('not synced')).length).toBeGreaterThanOrEqual(1);
    await fsp.writeFile(marker, `version 1\n${r.storeId}`);
    expect((await r.loop.syncNow()).uploads).toBe(1);
    expect(h.emu.memories(r.storeId)['/a.md']).toBe('edit while unbound');
  });

  for (const withFile of [false, true]) {
    it(`skips, with one warning, a folder whose marker became a directory${withFile ? ' holding a file' : ''}, and keeps what it holds`, async () => {
      const r = await rig({ '/a.md': 'a' });
      const marker = r.file('.anthropic-memory-store');
      await fsp.rm(r.file('a.md'));
      await fsp.rm(marker);
      await fsp.mkdir(marker);
      if (withFile) await fsp.writeFile(path.join(marker, 'notes.md'), 'agent notes');
      const first = await r.loop.syncNow();
      const second = await r.loop.syncNow();
      expect(first).toMatchObject({ skippedStores: 1, errors: 0, uploads: 0, deletes: 0, downloads: 0 });
      expect(second).toMatchObject({ skippedStores: 1, errors: 0 });
      expect(r.log.warnings().filter((w) => w.includes('not synced'))).toHaveLength(1);
      expect(r.log.warnings().filter((w) => w.includes('failed'))).toEqual([]);
      expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'a' });
      const end = await r.loop.finish({ clean: true });
      expect(end.pendingUploads).toBe(0);
      if (withFile) {
        expect(end.kept).toEqual([r.root]);
        expect(await fsp.readFile(path.join(marker, 'notes.md'), 'utf8')).toBe('agent notes');
      }
    });
  }

  it('downloads a folder wiped whole again instead of deleting its memories', async () => {
    const r = await rig({ '/a.md': 'a', '/b/c.md': 'c', '/d.md': 'd' });
    for (const name of await fsp.readdir(r.root)) await fsp.rm(path.join(r.root, name), { recursive: true });
    await r.loop.syncNow();
    const second = await r.loop.syncNow();
    expect(second.deletes).toBe(0);
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'a', '/b/c.md': 'c', '/d.md': 'd' });
    expect(await readTree(r.root)).toEqual({ 'a.md': 'a', 'b/c.md': 'c', 'd.md': 'd' });
    expect(await fsp.readFile(r.file('.anthropic-memory-store'), 'utf8')).toBe(`version 1\n${r.storeId}`);
  });
});

describe('symlinks in place of the marker or the folder', () => {
  it('does not sync a folder whose marker became a symlink (even to a valid marker), and keeps it at the end', async () => {
    const r = await rig({ '/a.md': 'a' });
    const elsewhere = path.join(h.tmp, 'valid-marker');
    await fsp.writeFile(elsewhere, `version 1\n${r.storeId}`);
    await fsp.rm(r.file('.anthropic-memory-store'));
    await fsp.symlink(elsewhere, r.file('.anthropic-memory-store'));
    await fsp.writeFile(r.file('a.md'), 'edited while unbound');
    const report = await r.loop.syncNow();
    expect(report).toMatchObject({ skippedStores: 1, uploads: 0 });
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'a' });
    const end = await r.loop.finish({ clean: true });
    expect(end.kept).toEqual([r.root]);
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'a' });
    expect(await fsp.readFile(elsewhere, 'utf8')).toBe(`version 1\n${r.storeId}`);
  });

  it('never syncs or removes through a mount root swapped for a symlink mid-session', async () => {
    const r = await rig({ '/a.md': 'a' });
    // A copy of the folder, marker included, elsewhere; the mount path now points at it.
    const decoy = path.join(h.tmp, 'decoy');
    await fsp.cp(r.root, decoy, { recursive: true });
    await fsp.writeFile(path.join(decoy, 'a.md'), 'decoy edit');
    await fsp.rm(r.root, { recursive: true });
    await fsp.symlink(decoy, r.root);
    h.emu.putMemory(r.storeId, '/b.md', 'console');
    const report = await r.loop.syncNow();
    expect(report).toMatchObject({ skippedStores: 1, uploads: 0, downloads: 0 });
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'a', '/b.md': 'console' });
    const end = await r.loop.finish({ clean: true });
    expect(end.kept).toEqual([r.root]);
    expect((await fsp.lstat(r.root)).isSymbolicLink()).toBe(true);
    expect(await readTree(decoy)).toEqual({ 'a.md': 'decoy edit' });
  });
});

describe('a removed folder', () => {
  it('is re-created and downloaded again, even for a one-memory store, and nothing is deleted', async () => {
    const r = await rig({ '/only.md': 'the one memory' });
    await fsp.rm(r.root, { recursive: true });
    await r.loop.syncNow();
    await r.loop.syncNow();
    expect(h.emu.memories(r.storeId)).toEqual({ '/only.md': 'the one memory' });
    expect(await readTree(r.root)).toEqual({ 'only.md': 'the one memory' });
    expect(await fsp.readFile(r.file('.anthropic-memory-store'), 'utf8')).toBe(`version 1\n${r.storeId}`);
  });
});

describe('hostile and unsyncable files', () => {
  it('skips planted symlinks (final and intermediate) and FIFOs with one warning, never following them', async () => {
    const r = await rig({ '/a.md': 'a' });
    const outside = path.join(h.tmp, 'outside');
    await fsp.mkdir(outside);
    await fsp.writeFile(path.join(outside, 'secret.md'), 'host secret');
    await fsp.symlink(path.join(outside, 'secret.md'), r.file('leak.md'));
    await fsp.symlink(outside, r.file('dir-link'));
    execFileSync('mkfifo', [r.file('pipe.md')]);
    await r.loop.syncNow();
    await r.loop.syncNow();
    expect(Object.keys(h.emu.memories(r.storeId))).toEqual(['/a.md']);
    const skipWarnings = r.log.lines.filter((l) => l.level >= 40 && l.msg.includes('not a regular file'));
    expect(skipWarnings.map((l) => l['path']).sort()).toEqual(['dir-link', 'leak.md', 'pipe.md']);
    // A Console memory below the symlinked folder is refused, never written through it.
    h.emu.putMemory(r.storeId, '/dir-link/planted.md', 'would escape');
    await r.loop.syncNow();
    expect(await fsp.readdir(outside)).toEqual(['secret.md']);
  });

  it('refuses binary and oversized files once per version and never reads them again', async () => {
    const r = await rig({ '/a.md': 'a' });
    await fsp.writeFile(r.file('image.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0xff, 0x00, 0xfe]));
    await fsp.writeFile(r.file('huge.md'), 'x'.repeat(150_000));
    const refused: string[] = [];
    r.loop.on('refused', (e) => refused.push(e.path));
    const first = await r.loop.syncNow();
    expect(first.refusals).toBe(2);
    const mark = h.emu.requests.length;
    const second = await r.loop.syncNow();
    expect(second.refusals).toBe(0);
    expect(requestsSince(mark)).toEqual(['GET /v1/memory_stores/:id/memories']);
    expect(refused.sort()).toEqual(['huge.md', 'image.png']);
    await fsp.writeFile(r.file('huge.md'), 'small now');
    expect((await r.loop.syncNow()).uploads).toBe(1);
    expect(h.emu.memories(r.storeId)['/huge.md']).toBe('small now');
  });

  it('warns once about an upload the server refuses (400) and sends it again only when the file changes', async () => {
    const r = await rig({ '/a.md': 'a' });
    await fsp.writeFile(r.file('new.md'), 'the server refuses this version');
    const fault = h.emu.faults.add({ route: /^POST .*\/memories$/, status: 400, message: 'refused by policy' });
    const refused: string[] = [];
    r.loop.on('refused', (e) => refused.push(e.path));
    expect(await r.loop.syncNow()).toMatchObject({ refusals: 1, uploads: 0, errors: 0 });
    const mark = h.emu.requests.length;
    expect(await r.loop.syncNow()).toMatchObject({ refusals: 0, uploads: 0 });
    expect(requestsSince(mark)).toEqual(['GET /v1/memory_stores/:id/memories']);
    expect(refused).toEqual(['new.md']);
    expect(
      r.log.lines.filter((l) => l.level >= 40 && l['path'] === 'new.md' && String(l['reason']).includes('refused by policy')),
    ).toHaveLength(1);
    fault.remove();
    await fsp.writeFile(r.file('new.md'), 'an accepted version');
    expect((await r.loop.syncNow()).uploads).toBe(1);
    expect(h.emu.memories(r.storeId)['/new.md']).toBe('an accepted version');
  });

  it('reports a local file where the store has a folder once per version, and stops retrying it', async () => {
    const r = await rig({ '/a.md': 'a' });
    await fsp.writeFile(r.file('notes'), 'a local file named notes');
    h.emu.putMemory(r.storeId, '/notes/x.md', 'a memory below a folder named notes');
    const refused: string[] = [];
    r.loop.on('refused', (e) => refused.push(e.path));
    await r.loop.syncNow();
    await r.loop.syncNow();
    const mark = h.emu.requests.length;
    await r.loop.syncNow();
    expect(requestsSince(mark)).toEqual(['GET /v1/memory_stores/:id/memories']);
    expect(refused.sort()).toEqual(['notes', 'notes/x.md']);
    expect(await fsp.readFile(r.file('notes'), 'utf8')).toBe('a local file named notes');
  });
});

describe('a folder replacing a file, or a file replacing a folder', () => {
  it('uploads a local folder that replaced a file once the file is deleted in the store', async () => {
    const r = await rig({ '/a.md': 'a file at first', '/b.md': 'b' });
    await fsp.rm(r.file('a.md'));
    await fsp.mkdir(r.file('a.md'));
    await fsp.writeFile(r.file('a.md/x.md'), 'inside the new folder');
    // 1st sync: /a.md still exists in the store, so /a.md/x.md is refused (path conflict).
    // 2nd sync: the deletion of /a.md is confirmed. 3rd: nothing blocks /a.md/x.md any more.
    for (let i = 0; i < 3; i++) await r.loop.syncNow();
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md/x.md': 'inside the new folder', '/b.md': 'b' });
  });

  it("uploads a local file that replaced a folder once the folder's memories are deleted in the store", async () => {
    const r = await rig({ '/notes/x.md': 'x', '/notes/y.md': 'y', '/b.md': 'b' });
    await fsp.rm(r.file('notes'), { recursive: true });
    await fsp.writeFile(r.file('notes'), 'now a plain file');
    for (let i = 0; i < 3; i++) await r.loop.syncNow();
    expect(h.emu.memories(r.storeId)).toEqual({ '/notes': 'now a plain file', '/b.md': 'b' });
  });

  it('a clean end still saves a folder that replaced a file in the last interval', async () => {
    const r = await rig({ '/a.md': 'a file at first', '/b.md': 'b' });
    await fsp.rm(r.file('a.md'));
    await fsp.mkdir(r.file('a.md'));
    await fsp.writeFile(r.file('a.md/x.md'), 'written in the last tool call');
    await r.loop.syncNow();
    const report = await r.loop.finish({ clean: true });
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md/x.md': 'written in the last tool call', '/b.md': 'b' });
    expect(report.pendingUploads).toBe(0);
  });
});

describe('parallelism', () => {
  /** Most requests matching `route` in flight at once, from the emulator's request log. */
  function peakInFlight(reqs: typeof h.emu.requests, route: string): number {
    const rs = reqs.filter((x) => x.route === route);
    return Math.max(0, ...rs.map((x) => rs.filter((y) => y.startedAt <= x.startedAt && x.startedAt < y.startedAt + y.ms).length));
  }

  it('syncs the stores in parallel, and runs uploads and pulls in parallel within the concurrency bound', async () => {
    const six = (tag: string): Record<string, string> =>
      Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`/${tag}${i}.md`, `${tag} ${i}`]));
    const one = await h.emu.createMemoryStore({ name: 'One', memories: six('p') });
    const two = await h.emu.createMemoryStore({ name: 'Two', memories: six('q') });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: one.id }, { memoryStoreId: two.id }]);
    const log = captureLogger();
    const mounted = await new MemoryMounter({ client, logger: log.logger }).mount(session);
    const loop = new SyncLoop({ client, mounted, logger: log.logger, stateDir: h.stateDir, clock: manualClock(), concurrency: 3 });
    const [rootOne, rootTwo] = mounted.roots as [string, string];
    for (let i = 0; i < 6; i++) {
      await fsp.writeFile(path.join(rootOne, `p${i}.md`), `p ${i} edited here`);
      h.emu.putMemory(two.id, `/q${i}.md`, `q ${i} edited in the Console`);
    }
    h.emu.faults.add({ route: /^GET .*\/memories$/, latencyMs: 300 });
    h.emu.faults.add({ route: /^(POST|GET) .*\/memories\/[^/]+$/, latencyMs: 200 });
    const mark = h.emu.requests.length;
    const report = await loop.syncNow();
    expect(report).toMatchObject({ uploads: 6, downloads: 6, errors: 0 });
    const sent = h.emu.requests.slice(mark);
    // Both stores' listings were in flight at the same time.
    const [l1, l2] = sent.filter((x) => x.route === 'GET /v1/memory_stores/:id/memories');
    expect(Math.max(l1!.startedAt, l2!.startedAt)).toBeLessThan(Math.min(l1!.startedAt + l1!.ms, l2!.startedAt + l2!.ms));
    // Six uploads (store One) and six pulls (store Two), at most 3 at once each, and more than 1.
    for (const route of ['POST /v1/memory_stores/:id/memories/:memoryId', 'GET /v1/memory_stores/:id/memories/:memoryId']) {
      const peak = peakInFlight(sent, route);
      expect(peak, route).toBeGreaterThan(1);
      expect(peak, route).toBeLessThanOrEqual(3);
    }
    expect(await readTree(rootTwo)).toEqual(
      Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`q${i}.md`, `q ${i} edited in the Console`])),
    );
    await loop.finish({ clean: false });
  });
});

describe('faults', () => {
  it('settles an upload whose response was lost by its sha: no duplicate, no conflict', async () => {
    const r = await rig({ '/a.md': 'a' });
    await fsp.writeFile(r.file('a.md'), 'edited');
    await fsp.writeFile(r.file('new.md'), 'created');
    h.emu.faults.add({ route: /^POST .*\/memories/, dropResponse: true, times: 2 });
    const conflicts: unknown[] = [];
    r.loop.on('conflict', (e) => conflicts.push(e));
    const first = await r.loop.syncNow();
    expect(first.uploads).toBe(0);
    expect(h.emu.memories(r.storeId)).toEqual({ '/a.md': 'edited', '/new.md': 'created' });
    const mark = h.emu.requests.length;
    const second = await r.loop.syncNow();
    expect(second).toMatchObject({ uploads: 0, downloads: 0, conflicts: 0 });
    expect(requestsSince(mark)).toEqual(['GET /v1/memory_stores/:id/memories']);
    expect(conflicts).toEqual([]);
    expect(r.loop.snapshot()[0]!.baseline['new.md']).toBeDefined();
  });

  it('gets through a burst of 503s by retrying on later syncs, never throwing', async () => {
    const r = await rig(Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`/m${i}.md`, `v${i}`])));
    for (let i = 0; i < 10; i++) await fsp.writeFile(r.file(`m${i}.md`), `edited ${i}`);
    const fault = h.emu.faults.add({ route: /^POST .*\/memories/, status: 503, rate: 0.5 });
    let errors = 0;
    for (let i = 0; i < 8 && Object.values(h.emu.memories(r.storeId)).some((c) => !c.startsWith('edited')); i++) {
      errors += (await r.loop.syncNow()).errors;
    }
    fault.remove();
    await r.loop.syncNow();
    expect(errors).toBeGreaterThan(0);
    const token = h.emu.sessionsToken(r.sessionId)!;
    expect(token.length).toBeGreaterThan(10);
    expect(JSON.stringify(r.log.lines)).not.toContain(token);
    expect(h.emu.memories(r.storeId)).toEqual(Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`/m${i}.md`, `edited ${i}`])));
  });
});

/** `count` new files spread over 7 new folders; returns them as store paths → contents. */
async function writeNewFiles(file: (rel: string) => string, count: number): Promise<Record<string, string>> {
  const written: Record<string, string> = {};
  for (let i = 0; i < count; i++) {
    const rel = `new-${i % 7}/file-${i}.md`;
    await fsp.mkdir(path.dirname(file(rel)), { recursive: true });
    await fsp.writeFile(file(rel), `file ${i}`);
    written[`/${rel}`] = `file ${i}`;
  }
  return written;
}
