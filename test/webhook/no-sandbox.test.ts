// A webhook handler whose worker has the default sandbox 'auto' where no sandbox starts serves no
// session: every signed delivery is answered 503 with the cause and fix, nothing is claimed, and
// the reason is logged once. With sandbox 'none' chosen, the same delivery is accepted and served.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { generateWebhookSecret, signWebhook, sessionWebhookEvent } from '../../src/testing/webhook-signing.js';
import { createWebhookHandler, type WebhookHandler } from '../../src/webhook/index.js';
import { EnvironmentWorker } from '../../src/worker/environment-worker.js';
import { captureLogger } from '../worker/helpers.js';

describe('a webhook handler whose worker has no working sandbox', () => {
  let dir: string;
  let emu: Emulator;
  let handler: WebhookHandler | undefined;
  const workers: EnvironmentWorker[] = [];
  const secret = generateWebhookSecret();

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-webhook-sandbox-'));
    emu = await startEmulator({ mountRoot: dir, leaseTtlSeconds: 4 });
  });

  afterEach(async () => {
    await handler?.close({ abortItems: true });
    handler = undefined;
    await Promise.all(workers.splice(0).map((w) => w.close()));
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  function handlerWith(sandbox: 'none' | { bwrapPath: string }, logger = captureLogger()): WebhookHandler {
    // concurrency 1: a webhook handler serves a queue whatever its worker's concurrency.
    const worker = new EnvironmentWorker({ client: emu.client(), workdir: dir, sandbox, concurrency: 1, logger: logger.logger });
    workers.push(worker);
    handler = createWebhookHandler({
      worker,
      client: emu.client(),
      webhookSecret: secret,
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      logger: logger.logger,
    });
    return handler;
  }

  it('answers 503 naming the cause and the fix, claims nothing, and logs the reason once', async () => {
    const capture = captureLogger();
    const h = handlerWith({ bwrapPath: '/nonexistent/bin/bwrap' }, capture);
    const { sessionId, workId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'touch /tmp/x' } }] });
    for (let i = 0; i < 2; i++) {
      const signed = signWebhook(sessionWebhookEvent(sessionId), secret);
      const answer = await h.handle({ headers: signed.headers, body: signed.body });
      expect(answer.status).toBe(503);
      const body = JSON.parse(answer.body) as { error: string; message: string };
      expect(body.error).toBe('sandbox_unavailable');
      expect(body.message).toContain('apt-get install bubblewrap');
      expect(body.message).toContain("sandbox: 'none'");
    }
    await h.idle();
    expect(emu.requests.filter((r) => r.route.endsWith('/work/poll'))).toEqual([]);
    expect(emu.workItem(workId)).toMatchObject({ state: 'queued', deliveries: 0, acknowledged: false });
    expect(capture.lines.filter((l) => l.level >= 50 && l.msg.includes('serves no session'))).toHaveLength(1);
    emu.archiveSession(sessionId);
  });

  it("with sandbox 'none' chosen, the delivery is accepted and the session served", async () => {
    const h = handlerWith('none');
    const { sessionId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo served' } }] });
    const signed = signWebhook(sessionWebhookEvent(sessionId), secret);
    expect((await h.handle({ headers: signed.headers, body: signed.body })).status).toBe(202);
    const done = await emu.waitForSession(sessionId);
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['served']);
  });
});
