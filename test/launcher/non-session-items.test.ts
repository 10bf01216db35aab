// Pins what happens to a work item that is not a session (a healthcheck) when the launcher or the
// webhook handler claims it: no sandbox and no handleItem, and the item is stopped right away with
// the environment key, so it does not come back once its lease lapses.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/internal/logger.js';
import { Launcher } from '../../src/launcher/index.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { generateWebhookSecret, sessionWebhookEvent, signWebhook } from '../../src/testing/webhook-signing.js';
import { createWebhookHandler } from '../../src/webhook/index.js';

async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('a healthcheck work item', () => {
  let dir: string;
  let emu: Emulator;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-healthcheck-'));
    emu = await startEmulator({ mountRoot: dir, leaseTtlSeconds: 1 });
  });
  afterEach(async () => {
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('is stopped by the launcher, without a sandbox, and not handed out again', async () => {
    const launched: string[] = [];
    const launcher = new Launcher({
      client: emu.client(),
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      command: 'true',
      stdio: 'ignore',
      logger: createLogger({ level: 'silent' }),
    });
    launcher.on('launched', (e) => launched.push(e.workId));
    const running = launcher.run();
    try {
      const workId = emu.enqueue({ type: 'healthcheck' });
      await until('the healthcheck to be stopped', () => emu.workItem(workId).state === 'stopped');
      // Longer than the lease: an item left acknowledged but not stopped would be handed out again.
      await new Promise((r) => setTimeout(r, 1_500));
      expect(emu.workItem(workId).deliveries).toBe(1);
      expect(launched).toEqual([]);
      const stops = emu.requests.filter((r) => r.path.endsWith(`/work/${workId}/stop`));
      expect(stops.map((r) => [r.status, r.credential])).toEqual([[200, 'environment_key']]);
    } finally {
      await launcher.close();
      await running;
    }
  });

  it('is stopped by the webhook handler, without handleItem', async () => {
    const secret = generateWebhookSecret();
    const calls: string[] = [];
    const handler = createWebhookHandler({
      worker: {
        handleItem: async (o) => (calls.push(o.workId), { workId: o.workId, sessionId: o.sessionId, status: 'completed', durationMs: 0 }),
      },
      client: emu.client(),
      webhookSecret: secret,
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      logger: createLogger({ level: 'silent' }),
    });
    try {
      const workId = emu.enqueue({ type: 'healthcheck' });
      const signed = signWebhook(sessionWebhookEvent('sesn_any'), secret);
      expect((await handler.handle({ headers: signed.headers, body: signed.body })).status).toBe(202);
      await handler.idle();
      expect(emu.workItem(workId).state).toBe('stopped');
      expect(calls).toEqual([]);
    } finally {
      await handler.close();
    }
  });
});
