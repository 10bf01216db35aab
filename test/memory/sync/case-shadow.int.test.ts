/**
 * Pins, against the emulator with the real SDK client and real folders, that on a case-insensitive
 * folder a memory created in the store under another letter case of a file the folder already
 * holds is never materialised (it would overwrite that file), whichever spelling sorts first; the
 * folder's own file keeps syncing.
 */
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
  await h.cleanup();
});

describe('a newcomer spelled like a synced file in another case', () => {
  it.each([
    { description: 'sorting before the synced spelling', synced: '/notes.md', newcomer: '/Notes.md' },
    { description: 'sorting after the synced spelling', synced: '/Notes.md', newcomer: '/notes.md' },
  ])('$description is shadowed and never written over the folder’s file', async ({ synced, newcomer }) => {
    const store = await h.emu.createMemoryStore({ name: 'Cases', memories: { [synced]: 'synced' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const log = captureLogger();
    const mounted = await new MemoryMounter({ client, logger: log.logger, assumeCaseInsensitive: true }).mount(session);
    const root = mounted.roots[0]!;
    const loop = new SyncLoop({ client, mounted, logger: log.logger, stateDir: h.stateDir, clock: manualClock() });

    h.emu.putMemory(store.id, newcomer, 'newcomer');
    expect(await loop.syncNow()).toMatchObject({ downloads: 0, errors: 0 });
    expect(await readTree(root)).toEqual({ [synced.slice(1)]: 'synced' });
    expect(Object.keys(loop.snapshot()[0]!.shadowed)).toEqual([newcomer.slice(1)]);

    await fsp.writeFile(path.join(root, synced.slice(1)), 'synced, edited');
    await loop.finish({ clean: true });
    expect(h.emu.memories(store.id)).toEqual({ [synced]: 'synced, edited', [newcomer]: 'newcomer' });
  });
});
