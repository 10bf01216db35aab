// Pins that a memory file a stopped tool call moved away is put back, never deleted in the store,
// as the official 1.16 worker does. The agent's bash call moves `notes.md` out of the store folder
// to work on it, meaning to move it back when done; the session is terminated while the call runs,
// so the runner stops the call half-way, with the file still away. The final sync then finds the
// file missing: without the rule it deletes the memory in the store (the final sync confirms
// deletions at once); with it the store keeps the memory, untouched, and the rest of the turn's
// work (a file an earlier call created) is saved as usual. The runner of SDK 1.16 stops a running
// call when the session terminates; the runners of 1.14 and 1.15 let it finish (it then moves the
// file back itself, and nothing is stopped): the store ends the same on every version, and the test
// says which of the two it saw, checked against the SDK version.
import { existsSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { sdkAtLeast } from '../sdk-version.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Emulator } from '../../src/testing/index.js';
import { exists, harness, waitFor, type Harness } from './helpers.js';

describe('a memory file moved away by a call that was stopped', () => {
  let h: Harness;
  let emu: Emulator;
  beforeEach(async () => {
    h = await harness({ leaseTtlSeconds: 10 });
    emu = h.emu;
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('is put back from the store at the final sync, not deleted there', async () => {
    const store = await emu.createMemoryStore({
      name: 'notes',
      memories: { '/notes.md': 'the only copy of my notes', '/keep.md': 'kept' },
    });
    const seeded = emu.memoryHistory(store.id).length;
    const root = path.join(h.mountRoot, 'notes');
    const away = path.join(h.tmp, 'work-in-progress.md');
    const { sessionId } = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [
        // A call that ends normally.
        { tool: 'bash', input: { command: `echo 'written before' > ${root}/new.md` } },
        // Moved out to be worked on, and meant to come back: the call is stopped in between.
        { tool: 'bash', input: { command: `mv ${root}/notes.md ${away} && sleep 15 && mv ${away} ${root}/notes.md` } },
      ],
    });
    const worker = h.worker({ sandbox: 'none', memorySyncIntervalMs: 5_000, finalFlushMs: 30_000 });
    const running = worker.run();
    try {
      await waitFor(() => emu.session(sessionId).scriptProgress.startsWith('step 2/2'), 15_000, 'the second call to start');
      await waitFor(() => !existsSync(path.join(root, 'notes.md')), 15_000, 'notes.md to be moved away');
      // The session ends while the call runs: the runner stops the call (1.16 on).
      emu.archiveSession(sessionId);
      const done = await emu.waitForSession(sessionId, { timeoutMs: 60_000 });
      expect(done.workStopped).toBe(true);
      // The item is stopped only once its memory is finished (final sync and unmount).
      // The stopped call's file is still in the store, as it was; the earlier call's file was saved.
      expect(emu.memories(store.id)).toEqual({
        '/notes.md': 'the only copy of my notes',
        '/keep.md': 'kept',
        '/new.md': 'written before\n',
      });
      expect(
        emu
          .memoryHistory(store.id)
          .slice(seeded)
          .map((w) => [w.op, w.path]),
      ).toEqual([['create', '/new.md']]);
      const stopped = existsSync(away);
      expect(stopped).toBe(sdkAtLeast('1.16.0'));
      if (stopped) {
        // The copy the call had moved away is where it left it (nothing of the agent's is removed).
        expect(await fsp.readFile(away, 'utf8')).toBe('the only copy of my notes');
        expect(
          h.capture.lines.some((l) => l.level === 40 && String(l.msg).includes('missing after a tool call was stopped or timed out')),
        ).toBe(true);
      }
      expect(await exists(root)).toBe(false);
    } finally {
      await worker.close();
      await running;
    }
  }, 120_000);
});
