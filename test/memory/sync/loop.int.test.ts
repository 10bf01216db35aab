/**
 * Pins the SyncLoop's timing and ending against the emulator: a due sync runs before the tool
 * call; after a tool call a sync starts only when the interval has passed, else one trailing sync
 * brings the last edit to the store within one interval; never two syncs at once; the interval
 * reads the injected monotonic clock, so a wall-clock jump changes nothing; `syncNow` is
 * abortable; `finish` runs the final sync and flush inside `finalFlushMs` even when every request
 * hangs (the requests in flight are really cancelled), reports what was cut off, unmounts, and
 * nothing runs afterwards.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import type Anthropic from '@anthropic-ai/sdk';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Clock } from '../../../src/internal/clock.js';
import { MemoryMounter, SyncLoop, type MountedSession } from '../../../src/memory/index.js';
import { captureLogger, harness, manualClock, openSession, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  vi.useRealTimers();
  await h.cleanup();
});

const LIST = 'GET /v1/memory_stores/:id/memories';

async function rig(opts: { clock?: Clock; intervalMs?: number | null; finalFlushMs?: number } = {}): Promise<{
  storeId: string;
  root: string;
  client: Anthropic;
  mounted: MountedSession;
  loop: SyncLoop;
  log: ReturnType<typeof captureLogger>;
}> {
  const store = await h.emu.createMemoryStore({ name: 'Loop', memories: { '/a.md': 'a', '/b.md': 'b' } });
  const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
  const log = captureLogger();
  const mounted = await new MemoryMounter({ client, logger: log.logger }).mount(session);
  const loop = new SyncLoop({
    client,
    mounted,
    logger: log.logger,
    stateDir: h.stateDir,
    ...(opts.intervalMs === null ? {} : { intervalMs: opts.intervalMs ?? 5_000 }),
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...(opts.finalFlushMs ? { finalFlushMs: opts.finalFlushMs } : {}),
  });
  return { storeId: store.id, root: mounted.roots[0]!, client, mounted, loop, log };
}

const tick = (ms = 50): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('when syncs run', () => {
  it('runs a due sync before the tool call, so the agent reads the fresh memory', async () => {
    const clock = manualClock();
    const r = await rig({ clock });
    h.emu.putMemory(r.storeId, '/a.md', 'fresh from the Console');
    const mark = h.emu.requests.length;
    await r.loop.beforeToolCall();
    expect(h.emu.requests.length).toBe(mark); // not due yet: nothing sent
    clock.advance(5_000);
    await r.loop.beforeToolCall();
    expect(await fsp.readFile(path.join(r.root, 'a.md'), 'utf8')).toBe('fresh from the Console');
    await r.loop.finish({ clean: false });
  });

  it('brings an edit made in the last tool call to the store within one interval (trailing sync)', async () => {
    const r = await rig({ intervalMs: 5_000 });
    const started = Date.now();
    await fsp.writeFile(path.join(r.root, 'a.md'), 'last edit of the turn');
    r.loop.afterToolCall();
    await tick(200);
    expect(h.emu.memories(r.storeId)['/a.md']).toBe('a'); // not yet: the interval has not passed
    while (h.emu.memories(r.storeId)['/a.md'] !== 'last edit of the turn' && Date.now() - started < 10_000) await tick(50);
    const elapsedMs = Date.now() - started;
    expect(h.emu.memories(r.storeId)['/a.md']).toBe('last edit of the turn');
    expect(elapsedMs).toBeGreaterThanOrEqual(4_500);
    expect(elapsedMs).toBeLessThan(7_000);
    await r.loop.finish({ clean: false });
  }, 15_000);

  it('starts one sync at once after a tool call when the interval has passed, however many calls follow', async () => {
    const clock = manualClock();
    const r = await rig({ clock });
    const mark = h.emu.requests.length;
    r.loop.afterToolCall();
    await tick(100);
    expect(h.emu.requests.length).toBe(mark);
    clock.advance(5_000);
    r.loop.afterToolCall();
    r.loop.afterToolCall();
    r.loop.afterToolCall();
    await tick(300);
    expect(h.emu.requests.slice(mark).map((x) => x.route)).toEqual([LIST]);
    await r.loop.finish({ clean: false });
  });

  it('never starts the trailing sync while a tool call is running; the end of the call starts it', async () => {
    const clock = manualClock();
    const r = await rig({ clock });
    clock.advance(4_990);
    r.loop.afterToolCall(); // not due yet: arms the trailing sync 10 ms out
    await r.loop.beforeToolCall(); // the next tool call starts
    clock.advance(100); // the interval has now passed while the tool runs
    const mark = h.emu.requests.length;
    await tick(300);
    expect(h.emu.requests.slice(mark).map((x) => x.route)).toEqual([]);
    r.loop.afterToolCall();
    await tick(300);
    expect(h.emu.requests.slice(mark).map((x) => x.route)).toEqual([LIST]);
    await r.loop.finish({ clean: false });
  });

  it('never runs two syncs at once', async () => {
    const r = await rig({ clock: manualClock() });
    h.emu.faults.add({ route: /^GET .*\/memories$/, latencyMs: 150 });
    const mark = h.emu.requests.length;
    await Promise.all([r.loop.syncNow(), r.loop.syncNow(), r.loop.syncNow()]);
    const lists = h.emu.requests.slice(mark).filter((x) => x.route === LIST);
    expect(lists).toHaveLength(3);
    for (let i = 1; i < lists.length; i++) {
      expect(lists[i]!.startedAt).toBeGreaterThanOrEqual(lists[i - 1]!.startedAt + lists[i - 1]!.ms);
    }
    await r.loop.finish({ clean: false });
  });

  it('reads only the injected monotonic clock: a wall-clock jump changes nothing', async () => {
    const clock = manualClock();
    const r = await rig({ clock });
    const mark = h.emu.requests.length;
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 3_600_000);
    r.loop.afterToolCall();
    await r.loop.beforeToolCall();
    vi.setSystemTime(Date.now() - 7_200_000);
    r.loop.afterToolCall();
    await tick(100);
    expect(h.emu.requests.length).toBe(mark);
    vi.useRealTimers();
    clock.advance(5_000);
    await r.loop.beforeToolCall();
    expect(h.emu.requests.slice(mark).map((x) => x.route)).toEqual([LIST]);
    await r.loop.finish({ clean: false });
  });

  it('syncs at most every 15 s by default', async () => {
    const clock = manualClock();
    const r = await rig({ clock, intervalMs: null });
    const mark = h.emu.requests.length;
    clock.advance(14_999);
    await r.loop.beforeToolCall();
    r.loop.afterToolCall();
    await tick(100);
    expect(h.emu.requests.length).toBe(mark);
    clock.advance(1);
    await r.loop.beforeToolCall();
    expect(h.emu.requests.slice(mark).map((x) => x.route)).toEqual([LIST]);
    r.loop.afterToolCall();
    await r.loop.finish({ clean: false });
  });

  it('refuses an interval under 5 s', async () => {
    const r = await rig();
    expect(() => new SyncLoop({ client: r.client, mounted: r.mounted, intervalMs: 1_000 })).toThrow(
      /memorySyncIntervalMs: expected a number >= 5000 or null, got 1000/,
    );
    await r.loop.finish({ clean: false });
  });

  it('lets a caller abort syncNow; the requests in flight are cancelled', async () => {
    const r = await rig({ clock: manualClock() });
    const fault = h.emu.faults.add({ route: /memories/, hang: true });
    const ctrl = new AbortController();
    setTimeout(() => ctrl.abort(new Error('caller gave up')), 200);
    await expect(r.loop.syncNow({ signal: ctrl.signal })).rejects.toThrow(/caller gave up/);
    await tick(100);
    expect(h.emu.requests.some((x) => x.fault === 'hang')).toBe(true);
    fault.remove();
    await expect(r.loop.syncNow()).resolves.toMatchObject({ errors: 0 });
    await r.loop.finish({ clean: false });
  });
});

describe('finish', () => {
  it('clean end: the final sync uploads the last edits, the flush sends nothing more, and the folder goes', async () => {
    const r = await rig({ clock: manualClock() });
    await fsp.writeFile(path.join(r.root, 'a.md'), 'final words');
    const mark = h.emu.requests.length;
    const report = await r.loop.finish({ clean: true });
    expect(report).toMatchObject({ cutOff: false, pendingUploads: 0, removed: [r.root], kept: [] });
    expect(report.final).toMatchObject({ uploads: 1 });
    expect(h.emu.memories(r.storeId)['/a.md']).toBe('final words');
    expect(h.emu.requests.slice(mark).map((x) => x.route)).toEqual([LIST, 'POST /v1/memory_stores/:id/memories/:memoryId']);
    expect(fs.existsSync(r.root)).toBe(false);
  });

  it('unclean end: only a push-only flush, no pulls', async () => {
    const r = await rig({ clock: manualClock() });
    await fsp.writeFile(path.join(r.root, 'a.md'), 'saved by the flush');
    h.emu.putMemory(r.storeId, '/b.md', 'console edit, never pulled');
    const downloaded: string[] = [];
    r.loop.on('downloaded', (e) => downloaded.push(e.path));
    const report = await r.loop.finish({ clean: false });
    expect(report.final).toBeUndefined();
    expect(report.flush).toMatchObject({ uploads: 1, downloads: 0 });
    expect(downloaded).toEqual([]);
    expect(h.emu.memories(r.storeId)['/a.md']).toBe('saved by the flush');
  });

  it('unclean end: a local edit the flush cannot upload (the store changed too) is kept outside the mount and reported', async () => {
    const r = await rig({ clock: manualClock() });
    await fsp.writeFile(path.join(r.root, 'a.md'), 'agent edit, lost unless kept');
    h.emu.putMemory(r.storeId, '/a.md', 'console edit');
    const report = await r.loop.finish({ clean: false });
    expect(h.emu.memories(r.storeId)['/a.md']).toBe('console edit');
    expect(fs.existsSync(r.root)).toBe(false);
    expect(report.pendingUploads).toBe(1);
    const warning = r.log.lines.find((l) => l.level >= 40 && Array.isArray(l['copies']));
    const copies = warning?.['copies'] as string[] | undefined;
    expect(copies).toHaveLength(1);
    expect(copies![0]!.startsWith(h.stateDir)).toBe(true);
    expect(await fsp.readFile(copies![0]!, 'utf8')).toBe('agent edit, lost unless kept');
    expect(warning!.msg).toContain(copies![0]!);
  });

  it('stays inside finalFlushMs when every memory request hangs, cancels them and reports the cut-off', async () => {
    const r = await rig({ finalFlushMs: 1_500 });
    await fsp.writeFile(path.join(r.root, 'a.md'), 'will not make it');
    h.emu.faults.add({ route: /memories/, hang: true });
    const cutOffs: unknown[] = [];
    r.loop.on('flushCutOff', (e) => cutOffs.push(e));
    const started = Date.now();
    const report = await r.loop.finish({ clean: true });
    const elapsedMs = Date.now() - started;
    expect(elapsedMs).toBeLessThan(1_500 + 700);
    expect(report).toMatchObject({ cutOff: true, pendingUploads: 1 });
    expect(cutOffs).toEqual([{ phase: 'final', boundMs: 1_500, pendingUploads: 1 }]);
    const warning = r.log.lines.find((l) => l.level >= 40 && l.msg.includes('cut off'));
    expect(warning?.['not_saved']).toEqual([path.join(r.root, 'a.md')]);
    // The folder goes with the unmount; the edit that did not make it is kept outside it.
    expect(await fsp.readFile((warning?.['copies'] as string[])[0]!, 'utf8')).toBe('will not make it');
    await tick(100);
    expect(h.emu.requests.some((x) => x.fault === 'hang')).toBe(true);
    expect(fs.existsSync(r.root)).toBe(false);
    console.info(`[figure] finish with every request hanging: ${elapsedMs} ms for finalFlushMs 1500`);
  });

  it('a sync under way when the mount is unmounted never re-creates the folder', async () => {
    const r = await rig({ clock: manualClock() });
    h.emu.putMemory(r.storeId, '/c.md', 'console');
    await fsp.rm(r.root, { recursive: true });
    // syncNow() returns once every store has passed its disposed check and is waiting on the disk
    // in its folder check; the unmount lands right then (it marks the mount disposed at once).
    const syncing = r.loop.syncNow();
    await r.mounted.unmount();
    await syncing;
    await tick(100);
    expect(fs.existsSync(r.root)).toBe(false);
    await r.loop.finish({ clean: false });
    expect(fs.existsSync(r.root)).toBe(false);
    expect(r.log.warnings().filter((w) => w.includes('re-created'))).toEqual([]);
  });

  it('touches nothing after finish', async () => {
    const r = await rig({ clock: manualClock() });
    await r.loop.finish({ clean: true });
    const mark = h.emu.requests.length;
    r.loop.afterToolCall();
    await r.loop.beforeToolCall();
    expect(await r.loop.syncNow()).toMatchObject({ uploads: 0, downloads: 0 });
    await tick(50);
    expect(h.emu.requests.length).toBe(mark);
    expect(fs.existsSync(r.root)).toBe(false);
    expect(await r.loop.finish({ clean: true })).toBe(await r.loop.finish({ clean: false }));
  });
});
