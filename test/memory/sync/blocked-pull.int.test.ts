/**
 * Pins, against the emulator with the real SDK client and real folders, that a memory the folder
 * cannot hold (a file stands where the memory needs a folder) is reported once per version: each
 * later sync retries it silently, a new version in the store is reported again, and the sync state
 * remembers the reported version.
 */
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMounter, SyncLoop } from '../../../src/memory/index.js';
import { captureLogger, harness, manualClock, openSession, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

describe('a memory whose folder is a file here', () => {
  it('is reported once per version and retried each sync', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Blocked', memories: { '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const log = captureLogger();
    const mounted = await new MemoryMounter({ client, logger: log.logger }).mount(session);
    const root = mounted.roots[0]!;
    const loop = new SyncLoop({ client, mounted, logger: log.logger, stateDir: h.stateDir, clock: manualClock(), deletions: 'disabled' });
    const refusals: string[] = [];
    loop.on('refused', (e) => {
      if (e.path === 'd/x.md') refusals.push(e.reason);
    });
    const blockedVersion = (): string | undefined => loop.snapshot()[0]!.blockedPulls?.['d/x.md'];

    // The local file `d` stands where the store's new memory needs the folder `d/`.
    await fsp.writeFile(path.join(root, 'd'), 'a local file named d');
    h.emu.putMemory(store.id, '/d/x.md', 'first');
    await loop.syncNow();
    expect(refusals).toEqual(['d is a file here, where the store has a folder']);
    const first = blockedVersion();
    expect(first).toMatch(/^[0-9a-f]{64}$/u);

    await loop.syncNow();
    await loop.syncNow();
    expect(refusals).toHaveLength(1);

    h.emu.putMemory(store.id, '/d/x.md', 'second');
    await loop.syncNow();
    expect(refusals).toHaveLength(2);
    expect(blockedVersion()).not.toBe(first);

    // Once the file is out of the way, the memory lands and the block is forgotten.
    await fsp.rm(path.join(root, 'd'));
    await loop.syncNow();
    expect(await fsp.readFile(path.join(root, 'd', 'x.md'), 'utf8')).toBe('second');
    expect(blockedVersion()).toBeUndefined();
    await loop.finish({ clean: true });
  });
});
