// Pins what an operator sees when the webhook handler's environment key is refused while claiming
// (401: a key the server never issued; 403: the key of another environment): one log line that says
// the key was refused and how to fix it (ANTHROPIC_ENVIRONMENT_KEY / the handler's environmentKey
// must belong to that environment), no retries of a refusal, the item left queued, and the key
// itself in no log line.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { generateWebhookSecret, signWebhook, sessionWebhookEvent } from '../../src/testing/webhook-signing.js';
import { createWebhookHandler, type WebhookHandler } from '../../src/webhook/index.js';
import { EnvironmentWorker } from '../../src/worker/environment-worker.js';
import { captureLogger } from '../worker/helpers.js';

describe('when the environment key is refused while claiming', () => {
  let dir: string;
  let emu: Emulator;
  let worker: EnvironmentWorker;
  let handler: WebhookHandler | undefined;
  const secret = generateWebhookSecret();

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-webhook-key-'));
    emu = await startEmulator({ mountRoot: dir, leaseTtlSeconds: 4 });
    worker = new EnvironmentWorker({ client: emu.client(), workdir: dir, logger: captureLogger('silent').logger });
  });

  afterEach(async () => {
    await handler?.close({ abortItems: true });
    handler = undefined;
    await worker.close();
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const rows = [
    { description: 'a key the server never issued answers 401', status: 401, key: (_e: Emulator) => 'sk-ant-envkey-never-issued-4f1c9a' },
    {
      description: 'the key of another environment answers 403',
      status: 403,
      key: (e: Emulator) => e.createEnvironment({ name: 'other' }).key,
    },
  ];
  for (const row of rows) {
    it(`logs that the key was refused and how to fix it, without the key, and leaves the item queued: ${row.description}`, async () => {
      const capture = captureLogger();
      const wrongKey = row.key(emu);
      handler = createWebhookHandler({
        worker,
        client: emu.client(),
        webhookSecret: secret,
        environmentId: emu.environmentId,
        environmentKey: wrongKey,
        logger: capture.logger,
      });
      const { sessionId, workId } = await emu.createSession({ script: [] });
      const signed = signWebhook(sessionWebhookEvent(sessionId), secret);
      expect((await handler.handle({ headers: signed.headers, body: signed.body })).status).toBe(202);
      await handler.idle();

      const refused = capture.lines.filter((l) => l.msg.includes('environment key was refused'));
      expect(refused).toHaveLength(1);
      const line = refused[0]!;
      expect(line.level).toBeGreaterThanOrEqual(50);
      expect(line.status).toBe(row.status);
      expect(line.msg).toContain(emu.environmentId);
      expect(line.msg).toContain('ANTHROPIC_ENVIRONMENT_KEY');
      expect(line.msg).toContain('environmentKey');
      // A refusal is not retried: one poll, no backoff.
      expect(emu.requests.filter((r) => r.route.endsWith('/work/poll'))).toHaveLength(1);
      expect(capture.lines.filter((l) => l.msg.includes('retrying'))).toEqual([]);
      expect(emu.workItem(workId).state).toBe('queued');
      for (const raw of capture.raw) expect(raw).not.toContain(wrongKey);
      emu.archiveSession(sessionId);
    });
  }
});
