/**
 * Pins that server paths the API itself refuses (a Unicode format character such as U+202E, a
 * name not in NFC) are never written: the mount leaves them out and later syncs keep them out,
 * with exactly one warning per path naming it and the fix, while the other memories sync.
 */
import * as fsp from 'node:fs/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMounter, SyncLoop } from '../../../src/memory/index.js';
import { captureLogger, harness, openSession, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

const BAD = ['/invoice-\u202Egpj.exe', '/cafe\u0301.md'];

describe('server paths with format characters or not in NFC', () => {
  it('are never written, with one warning each across the mount and later syncs', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Unicode', memories: { '/ok.md': 'ok', '/a.md': 'a', '/b.md': 'b' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    // The emulator refuses these paths on create (as the API does), so a wrong server lists them.
    h.emu.faults.add({
      route: /memories$/,
      rewrite: (b) => {
        const body = b as { data: Array<Record<string, unknown>> };
        return {
          ...body,
          data: body.data.map((m) => (m['path'] === '/a.md' ? { ...m, path: BAD[0] } : m['path'] === '/b.md' ? { ...m, path: BAD[1] } : m)),
        };
      },
    });
    const log = captureLogger();
    const mounted = await new MemoryMounter({ client, logger: log.logger }).mount(session);
    const root = mounted.roots[0]!;
    const loop = new SyncLoop({ client, mounted, logger: log.logger, stateDir: h.stateDir, intervalMs: 5_000 });
    await loop.syncNow();
    await loop.syncNow();
    expect((await fsp.readdir(root)).sort()).toEqual(['.anthropic-memory-store', 'ok.md']);
    for (const bad of BAD) {
      const warnings = log.lines.filter((l) => l.level >= 40 && JSON.stringify(l).includes(JSON.stringify(bad).slice(1, -1)));
      expect(warnings, bad).toHaveLength(1);
      expect(String(warnings[0]!['reason'])).toMatch(/format character U\+202E|not in Unicode NFC/);
      expect(String(warnings[0]!['reason'])).toContain('rename it');
    }
    await loop.finish({ clean: true });
  });
});
