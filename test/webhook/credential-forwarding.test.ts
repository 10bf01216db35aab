// Pins what the webhook handler hands its worker per item: the item's ids and its work secret,
// and the environment key only for an item whose secret yields no sessions token (the item is
// served with its own token; the key stays with the drain's polls and acks).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/internal/logger.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { generateWebhookSecret, sessionWebhookEvent, signWebhook } from '../../src/testing/webhook-signing.js';
import { createWebhookHandler, type WebhookHandler, type WebhookWorker } from '../../src/webhook/index.js';

type HandleItemArgs = Parameters<WebhookWorker['handleItem']>[0];

describe('what the webhook handler forwards to handleItem', () => {
  let dir: string;
  let emu: Emulator;
  let handler: WebhookHandler;
  const calls: HandleItemArgs[] = [];
  const secret = generateWebhookSecret();
  // A worker that records its calls and reports each item completed (the item stays with the emulator).
  const worker: WebhookWorker = {
    handleItem: async (args) => {
      calls.push(args);
      return { workId: args.workId, sessionId: args.sessionId, status: 'completed', durationMs: 0 };
    },
  };

  beforeEach(async () => {
    calls.length = 0;
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-webhook-fwd-'));
    emu = await startEmulator({ mountRoot: dir });
    handler = createWebhookHandler({
      worker,
      client: emu.client(),
      webhookSecret: secret,
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      logger: createLogger({ level: 'silent' }),
    });
  });
  afterEach(async () => {
    await handler.close({ abortItems: true });
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const rows = [
    { description: 'an item with a secret gets the secret and not the environment key', withSecret: true },
    { description: 'an item without a secret gets the environment key', withSecret: false },
  ];
  for (const row of rows) {
    it(row.description, async () => {
      const { sessionId, workId } = await emu.createSession({ script: [], secret: row.withSecret });
      const signed = signWebhook(sessionWebhookEvent(sessionId), secret);
      expect((await handler.handle({ headers: signed.headers, body: signed.body })).status).toBe(202);
      await handler.idle();
      expect(calls).toHaveLength(1);
      const call = calls[0]!;
      expect(call).toMatchObject({ workId, sessionId, environmentId: emu.environmentId });
      if (row.withSecret) {
        expect(call.workSecret).toBe(emu.workSecret(workId));
        expect(call).not.toHaveProperty('environmentKey');
      } else {
        expect(call).not.toHaveProperty('workSecret');
        expect(call.environmentKey).toBe(emu.environmentKey);
      }
      emu.archiveSession(sessionId);
    });
  }
});
