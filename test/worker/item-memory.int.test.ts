// Pins the memory handle of one work item (ItemMemory) against the emulator and real folders: it
// takes the stores' mount paths (waiting while another session holds one), mounts the stores and
// starts their sync loop, forwards memory events with the item's ids and counts them, and its
// finish (final sync, flush, unmount) is bounded by finalFlushMs plus a slack, after which the
// worker stops waiting. Whatever happened, the finish releases the mount paths, also when the mount
// itself failed.
import { EventEmitter } from 'node:events';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defaultMemoryPort } from '../../src/worker/default-memory-port.js';
import type { WorkerEventMap } from '../../src/worker/events.js';
import { FINISH_SLACK_MS, ItemMemory, type ItemMemorySettings } from '../../src/worker/item-memory.js';
import type { MemoryPort } from '../../src/worker/memory-port.js';
import { WorkerMetrics } from '../../src/worker/metrics.js';
import { PathLocks } from '../../src/worker/path-locks.js';
import { captureLogger, harness, openSession, type Harness } from '../memory/int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

interface Rig {
  memory: ItemMemory;
  pathLocks: PathLocks;
  metrics: WorkerMetrics;
  events: Array<{ name: string; payload: Record<string, unknown> }>;
  log: ReturnType<typeof captureLogger>;
  storeId: string;
  root: string;
  sessionId: string;
}

async function rig(
  opts: { settings?: Partial<ItemMemorySettings>; port?: MemoryPort; pathLocks?: PathLocks; storeId?: string } = {},
): Promise<Rig> {
  const storeId = opts.storeId ?? (await h.emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } })).id;
  const { client, session } = await openSession(h.emu, [{ memoryStoreId: storeId }]);
  const log = captureLogger();
  const emitter = new EventEmitter<WorkerEventMap>();
  const events: Rig['events'] = [];
  for (const name of ['mounted', 'synced', 'uploaded', 'flushCutOff', 'unmounted'] as const) {
    emitter.on(name, (payload: object) => events.push({ name, payload: payload as Record<string, unknown> }));
  }
  const pathLocks = opts.pathLocks ?? new PathLocks();
  const metrics = new WorkerMetrics();
  const memory = new ItemMemory({
    port: opts.port ?? defaultMemoryPort,
    pathLocks,
    metrics,
    emit: (name, ...payload) => void (emitter.emit as (n: string, ...p: unknown[]) => boolean)(name, ...payload),
    client,
    logger: log.logger,
    settings: {
      workdir: path.join(h.tmp, 'work'),
      stateDir: h.stateDir,
      allowedMountRoots: [],
      mountTimeoutMs: 60_000,
      memorySyncDeletions: 'enabled',
      memoryDeleteAfterMs: 30_000,
      finalFlushMs: 5_000,
      pathWaitMs: 30_000,
      memoryCacheBytes: 0,
      memorySyncIntervalMs: 5_000,
      ...opts.settings,
    },
    workId: `work_for_${session.id}`,
    session,
  });
  return { memory, pathLocks, metrics, events, log, storeId, root: path.join(h.mountRoot, 'notes'), sessionId: session.id };
}

async function exists(p: string): Promise<boolean> {
  return fsp.lstat(p).then(
    () => true,
    () => false,
  );
}

describe('ItemMemory', () => {
  it('mounts the stores, forwards and counts their events, and on a clean finish saves the last edit, removes the folder and frees the paths', async () => {
    const r = await rig();
    await r.memory.lockPaths(new AbortController().signal);
    expect(r.pathLocks.snapshot().map((s) => s.path)).toEqual([r.root]);
    await r.memory.mount(new AbortController().signal);
    expect(r.memory.storeCount).toBe(1);
    expect(r.memory.roots).toEqual({ all: [r.root], readOnly: [] });
    expect(await fsp.readFile(path.join(r.root, 'a.md'), 'utf8')).toBe('A');
    expect(r.events.find((e) => e.name === 'mounted')?.payload).toMatchObject({
      storeId: r.storeId,
      workId: `work_for_${r.sessionId}`,
      sessionId: r.sessionId,
    });

    await fsp.writeFile(path.join(r.root, 'b.md'), 'last words');
    const report = await r.memory.finish(true);

    expect(report).toMatchObject({ cutOff: false, pendingUploads: 0, removed: [r.root], kept: [] });
    expect(report?.final).toMatchObject({ uploads: 1 });
    expect(h.emu.memories(r.storeId)['/b.md']).toBe('last words');
    expect(await exists(r.root)).toBe(false);
    expect(r.events.filter((e) => e.name === 'uploaded').map((e) => e.payload)).toEqual([
      expect.objectContaining({ path: 'b.md', storeId: r.storeId, workId: `work_for_${r.sessionId}`, sessionId: r.sessionId }),
    ]);
    expect(r.metrics.snapshot(0)).toMatchObject({ uploads: 1, flushCutOffs: 0 });
    expect(r.metrics.snapshot(0).syncs).toBeGreaterThanOrEqual(1);
    expect(r.pathLocks.snapshot()).toEqual([]);
    // Finishing again changes nothing and returns the same report.
    expect(await r.memory.finish(false)).toBe(report);
  });

  it('waits for a mount path another session holds, and takes it once that session finishes', async () => {
    const pathLocks = new PathLocks();
    const first = await rig({ pathLocks });
    await first.memory.lockPaths(new AbortController().signal);
    await first.memory.mount(new AbortController().signal);
    const second = await rig({ pathLocks, storeId: first.storeId });
    let locked = false;
    const waiting = second.memory.lockPaths(new AbortController().signal).then(() => {
      locked = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(locked).toBe(false);

    await first.memory.finish(true);
    await waiting;
    expect(pathLocks.snapshot()).toEqual([expect.objectContaining({ path: first.root, sessionId: second.sessionId })]);
    await second.memory.finish(true);
    expect(pathLocks.snapshot()).toEqual([]);
  });

  describe('when the finish runs out of time', () => {
    it('the memory core cuts itself off at finalFlushMs, keeps the unsaved edit outside the mount and counts the cut-off', async () => {
      const r = await rig({ settings: { finalFlushMs: 1_000 } });
      await r.memory.lockPaths(new AbortController().signal);
      await r.memory.mount(new AbortController().signal);
      await fsp.writeFile(path.join(r.root, 'a.md'), 'will not make it');
      h.emu.faults.add({ route: /memories/, hang: true });

      const report = await r.memory.finish(true);

      expect(report).toMatchObject({ cutOff: true, pendingUploads: 1 });
      expect(r.events.filter((e) => e.name === 'flushCutOff').map((e) => e.payload)).toEqual([
        expect.objectContaining({ boundMs: 1_000, pendingUploads: 1, workId: `work_for_${r.sessionId}` }),
      ]);
      expect(r.metrics.snapshot(0).flushCutOffs).toBe(1);
      expect(report?.unsavedCopies).toHaveLength(1);
      expect(await fsp.readFile(report!.unsavedCopies[0]!, 'utf8')).toBe('will not make it');
      expect(r.pathLocks.snapshot()).toEqual([]);
    });

    it('stops waiting for a finish that overruns finalFlushMs plus the slack, says so, and still frees the paths', async () => {
      // A memory core whose finish never returns, whatever its signal says.
      const port: MemoryPort = {
        ...defaultMemoryPort,
        syncLoop: (opts) => {
          const loop = defaultMemoryPort.syncLoop(opts);
          loop.finish = () => new Promise(() => {});
          return loop;
        },
      };
      const r = await rig({ port, settings: { finalFlushMs: 500 } });
      await r.memory.lockPaths(new AbortController().signal);
      await r.memory.mount(new AbortController().signal);

      const started = Date.now();
      const report = await r.memory.finish(true);
      const tookMs = Date.now() - started;

      expect(report).toBeUndefined();
      expect(tookMs).toBeGreaterThanOrEqual(500 + FINISH_SLACK_MS - 50);
      expect(r.log.lines.find((l) => l.msg === 'memory finish overran its bound; the worker moved on')).toMatchObject({ bound_ms: 500 });
      expect(r.pathLocks.snapshot()).toEqual([]);
    });
  });

  describe('when the mount fails', () => {
    it('frees the paths at the finish and leaves no folder', async () => {
      const r = await rig({ settings: { allowedMountRoots: ['/srv/allowed-only'] } });
      await r.memory.lockPaths(new AbortController().signal);
      await expect(r.memory.mount(new AbortController().signal)).rejects.toMatchObject({ code: 'MAW_MEMORY_MOUNT' });
      expect(r.pathLocks.snapshot().map((s) => s.path)).toEqual([r.root]);

      expect(await r.memory.finish(false)).toBeUndefined();
      expect(r.pathLocks.snapshot()).toEqual([]);
      expect(r.memory.storeCount).toBe(0);
      expect(await exists(r.root)).toBe(false);
    });

    it('frees the paths when the mount outlives mountTimeoutMs', async () => {
      const r = await rig({ settings: { mountTimeoutMs: 1_000 } });
      h.emu.faults.add({ route: /^GET .*\/memories$/, hang: true });
      await r.memory.lockPaths(new AbortController().signal);
      await expect(r.memory.mount(new AbortController().signal)).rejects.toThrow(/did not finish within 1000 ms/);

      await r.memory.finish(false);
      expect(r.pathLocks.snapshot()).toEqual([]);
      expect(await exists(r.root)).toBe(false);
    });
  });
});
