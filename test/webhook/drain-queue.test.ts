// Pins claimOne, the poll + ack step of the webhook drain, against the emulator: a poll that never
// answers is cut off at its bound (the drain retries instead of hanging for the SDK's 10-minute
// timeout), and closing the drain while an ack is in flight does not cut the ack short (an ack that
// reached the server makes the item ours, so the caller must get it and run it to its stop).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { claimOne } from '../../src/webhook/drain-queue.js';
import { scopedClient } from '../../src/worker/scoped-client.js';

async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, limit]);
  } finally {
    clearTimeout(timer);
  }
}

describe('claimOne', () => {
  let dir: string;
  let emu: Emulator;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-drain-'));
    emu = await startEmulator({ mountRoot: dir });
  });
  afterEach(async () => {
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const envClient = () => scopedClient(emu.client(), emu.environmentKey);

  it('cuts off a poll that never answers, naming the environment and the bound; the next claim gets the item', async () => {
    const { workId } = await emu.createSession({ script: [] });
    emu.faults.add({ route: /\/work\/poll$/, hang: true, times: 1 });
    const hung = claimOne(envClient(), emu.environmentId, { workerId: 'w', pollCutOffMs: 300 });
    const err = await within(
      20_000,
      'the hung poll',
      hung.then(
        () => undefined,
        (e: unknown) => e as Error,
      ),
    );
    expect(err).toBeInstanceOf(Error);
    expect(err!.message).toContain(emu.environmentId);
    expect(err!.message).toContain('300 ms');
    const item = await within(20_000, 'the next claim', claimOne(envClient(), emu.environmentId, { workerId: 'w' }));
    expect(item?.workId).toBe(workId);
  });

  it('finishes an ack in flight when the drain is closed, and hands the acknowledged item back', async () => {
    const { workId, sessionId } = await emu.createSession({ script: [] });
    emu.faults.add({ route: /\/ack$/, latencyMs: 1_000 });
    const ctrl = new AbortController();
    // Close the moment the ack is sent (the poll's answer is in hand), while the ack is on its way.
    const client = envClient().withOptions({
      fetch: (url: string | URL | Request, init?: RequestInit) => {
        if (String(url instanceof Request ? url.url : url).includes('/ack'))
          queueMicrotask(() => ctrl.abort(new Error('webhook handler closed')));
        return fetch(url, init);
      },
    });
    const claiming = claimOne(client, emu.environmentId, { workerId: 'w', signal: ctrl.signal });
    const item = await within(20_000, 'the claim', claiming);
    expect(ctrl.signal.aborted).toBe(true);
    expect(item).toMatchObject({ workId, sessionId });
    expect(emu.workItem(workId).acknowledged).toBe(true);
  });
});
