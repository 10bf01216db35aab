/**
 * Pins race-free writes: while an agent in another process swaps sub-folders of a mount for
 * symlinks to an outside folder in a tight loop, the download at mount, pulls, Console deletes,
 * uploads and the unmount write, rename and remove only inside the mount. Nothing outside the mount changes, no outside byte is uploaded,
 * and the worker keeps running. Prints the time spent and the number of swaps.
 */
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMounter, SyncLoop } from '../../../src/memory/index.js';
import { snapshotTree } from '../fs-snapshot.js';
import { captureLogger, harness, openSession, type Harness } from '../int-helpers.js';
import { startSwapper } from '../swapper.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

const SECRET = 'OUTSIDE-SECRET';
const ROUNDS = 3;
const ROUND_MS = 3_500;

function seed(round: number): Record<string, string> {
  const out: Record<string, string> = { '/top.md': 'top' };
  for (let i = 0; i < 12; i++) {
    out[`/sub/f${i}.md`] = `r${round} f${i}`;
    out[`/sub/deep/g${i}.md`] = `r${round} g${i}`;
  }
  return out;
}

async function plantOutside(outside: string): Promise<void> {
  await fsp.mkdir(path.join(outside, 'deep'), { recursive: true });
  for (let i = 0; i < 12; i++) {
    await fsp.writeFile(path.join(outside, `f${i}.md`), `${SECRET} f${i}`);
    await fsp.writeFile(path.join(outside, 'deep', `g${i}.md`), `${SECRET} g${i}`);
  }
}

describe('when an agent swaps mount folders for symlinks during pulls, syncs and unmount', () => {
  it('changes nothing outside the mount and uploads no outside byte', async () => {
    const outside = path.join(h.tmp, 'outside');
    await plantOutside(outside);
    const before = await snapshotTree(h.tmp, [h.mountRoot, h.stateDir]);
    const started = Date.now();
    let swaps = 0;
    let syncs = 0;
    const finishMs: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const store = await h.emu.createMemoryStore({ name: `Race ${round}`, memories: seed(round) });
      const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
      const log = captureLogger();
      const mounted = await new MemoryMounter({ client, logger: log.logger }).mount(session);
      const root = mounted.roots[0]!;
      const loop = new SyncLoop({ client, mounted, logger: log.logger, stateDir: h.stateDir, intervalMs: 5_000 });
      const swapper = startSwapper(root, outside, ['sub', 'sub/deep']);
      try {
        const roundEnd = Date.now() + ROUND_MS;
        for (let edit = 0; Date.now() < roundEnd; edit++) {
          for (let i = 0; i < 12; i++) {
            // Every other round a third of the memories are deleted in the Console (local removals
            // and folder pruning), and come back the round after (pulls of new files).
            if (edit % 2 === 1 && i % 3 === 0) {
              h.emu.removeMemory(store.id, `/sub/f${i}.md`);
              h.emu.removeMemory(store.id, `/sub/deep/g${i}.md`);
              continue;
            }
            h.emu.putMemory(store.id, `/sub/f${i}.md`, `console edit ${edit} f${i}`);
            h.emu.putMemory(store.id, `/sub/deep/g${i}.md`, `console edit ${edit} g${i}`);
          }
          await fsp.writeFile(path.join(root, 'top.md'), `agent edit ${edit}`);
          await loop.syncNow();
          syncs++;
        }
        const finishStarted = Date.now();
        await loop.finish({ clean: true });
        finishMs.push(Date.now() - finishStarted);
      } finally {
        swaps += await swapper.stop();
      }
      for (const content of Object.values(h.emu.memories(store.id))) expect(content).not.toContain(SECRET);
      await fsp.rm(root, { recursive: true, force: true });
    }
    const after = await snapshotTree(h.tmp, [h.mountRoot, h.stateDir]);
    const seconds = (Date.now() - started) / 1000;
    console.log(
      `symlink race: ${seconds.toFixed(1)} s, ${swaps} swaps, ${syncs} syncs, ${ROUNDS} unmounts (final sync + unmount: ${finishMs.join(', ')} ms)`,
    );
    expect(after).toEqual(before);
    expect(swaps).toBeGreaterThan(100);
  }, 60_000);

  it('a download that creates its files under their names writes none of them outside the mount', async () => {
    const outside = path.join(h.tmp, 'outside');
    await plantOutside(outside);
    const before = await snapshotTree(h.tmp, [h.mountRoot, h.stateDir]);
    const memories: Record<string, string> = {};
    for (let i = 0; i < 150; i++) {
      memories[`/sub/n${i}.md`] = `sub ${i}`;
      memories[`/sub/deep/n${i}.md`] = `deep ${i}`;
    }
    const store = await h.emu.createMemoryStore({ name: 'Race mount', memories });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    // Slow pages: the download runs long enough for many swaps.
    h.emu.faults.add({ route: /^GET \/v1\/memory_stores\/[^/]+\/memories$/, latencyMs: 40 });
    const root = path.join(h.mountRoot, 'race-mount');
    // Started before the folder exists: it swaps from the moment the download creates `sub`.
    const swapper = startSwapper(root, outside, ['sub', 'sub/deep']);
    let swaps = 0;
    let result: unknown;
    try {
      result = await new MemoryMounter({ client, logger: captureLogger().logger, stateDir: h.stateDir })
        .mount(session)
        .catch((e: unknown) => e);
    } finally {
      swaps = await swapper.stop();
    }
    expect(await snapshotTree(h.tmp, [h.mountRoot, h.stateDir])).toEqual(before);
    if (result instanceof Error) expect(result.name).toBe('MemoryMountError');
    else await (result as { unmount(): Promise<unknown> }).unmount();
    expect(swaps).toBeGreaterThan(0);
  }, 60_000);
});
