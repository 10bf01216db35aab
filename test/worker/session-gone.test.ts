// Pins a session that is gone while it runs: answering 404 on every read of it after a dropped
// stream, or deleted (`DELETE /v1/sessions/:id`, whose `session.deleted` event ends the runner).
// The store outlives the session, so its memory still gets the final sync (the agent's last edit and
// its delete both reach the store) and the item is stopped. SDK 1.16's runner throws the
// 404 refusal, and the outcome then says why (`reason: 'session_gone'`); 1.14 and 1.15 end quietly
// on it, with the same memory and stop.
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { SessionToolRunner } from '@anthropic-ai/sdk/lib/tools/SessionToolRunner';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { WorkerEventMap } from '../../src/worker/events.js';
import { harness, stopRequests, waitFor, type Harness } from './helpers.js';

/** The installed runner throws a permanent refusal to read the session (1.16 and later). */
const runnerThrowsRefusal = typeof (SessionToolRunner.prototype as { _setSendRetryWindow?: unknown })._setSendRetryWindow !== 'function';

describe('a session that is gone (404) while it runs', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  /**
   * A session whose one call edits a memory and deletes another, after which `goAway` makes the
   * session gone; served with a long sync interval, so only the end of the session can save both.
   */
  async function serveUntilGone(goAway: (sessionId: string) => void | Promise<void>) {
    const { emu } = h;
    const store = await emu.createMemoryStore({ name: 'notes', memories: { '/plan.md': 'old plan', '/stale.md': 'to delete' } });
    const dir = path.join(h.mountRoot, 'notes');
    let answered: string[] = [];
    const { sessionId, workId } = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [
        { tool: 'bash', input: { command: `printf 'new plan' > ${dir}/plan.md && rm ${dir}/stale.md && echo edited` } },
        {
          console: async () => {
            answered = emu.session(sessionId).toolResults.map((r) => r.text.trim());
            await goAway(sessionId);
          },
        },
      ],
      end: 'idle',
    });
    const worker = h.worker({ memorySyncIntervalMs: 600_000 });
    const ended: Array<WorkerEventMap['sessionEnded'][0]> = [];
    worker.on('sessionEnded', (e) => ended.push(e));
    const running = worker.run();
    await waitFor(() => ended.length > 0, 30_000, 'the session to end');
    await worker.close();
    await running;
    expect(answered).toEqual(['edited']);
    return { ...ended[0]!, storeId: store.id, workId };
  }

  // The emulator's store refuses the token of a deleted session (its attachment went with it), so
  // here the final sync is refused: the edit is kept as an unsaved copy, never dropped silently.
  it("deleted mid-run: the final sync runs, the agent's edit is kept (the store refuses a deleted session's token), the item is stopped", async () => {
    const consoleClient = h.emu.client();
    const { outcome, flush, storeId, workId } = await serveUntilGone(async (sessionId) => {
      await consoleClient.beta.sessions.delete(sessionId);
    });

    expect(outcome.status).toBe('completed');
    expect(flush?.final).toBeDefined();
    const copies = flush?.unsavedCopies ?? [];
    expect(copies.map((c) => path.basename(c))).toEqual(['plan.md']);
    expect(await fsp.readFile(copies[0]!, 'utf8')).toBe('new plan');
    expect(h.emu.memories(storeId)).toEqual({ '/plan.md': 'old plan', '/stale.md': 'to delete' });
    expect(stopRequests(h, workId).map((r) => r.body)).toEqual([{ force: true }]);
  });

  it("answering 404 on every read: the final sync saves the agent's last edit and delete, the item is stopped, the outcome says why", async () => {
    const { outcome, flush, storeId, workId } = await serveUntilGone((sessionId) => {
      h.emu.faults.add({
        route: new RegExp(`^(GET|POST) /v1/sessions/${sessionId}(/events(/stream)?)?$`),
        status: 404,
        errorType: 'not_found_error',
        message: `session ${sessionId} not found`,
      });
      h.emu.dropStreams(sessionId);
    });

    expect(outcome.status).toBe('completed');
    expect(outcome.error).toBeUndefined();
    expect(flush?.final).toBeDefined();
    expect(h.emu.memories(storeId)).toEqual({ '/plan.md': 'new plan' });
    expect(stopRequests(h, workId).map((r) => r.body)).toEqual([{ force: true }]);
    if (runnerThrowsRefusal) {
      expect(outcome.reason).toBe('session_gone');
      expect(h.capture.lines.some((l) => l.msg.includes('the session is gone (404 on reading it)'))).toBe(true);
    }
  });
});
