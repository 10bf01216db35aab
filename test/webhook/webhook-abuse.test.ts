// Pins the webhook handler under deliveries that go wrong: a redelivery after a drain that gave up
// drains again and its item runs (the id is remembered only once a drain reached the end of the
// queue); a body past `maxBodyBytes` is answered 413 and its connection closed as soon as the limit
// is passed, whether it declares its length or streams without one, so the server reads little
// more than the limit of a client that keeps sending; an unsigned request is refused (401) before
// its body is read.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/internal/logger.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { generateWebhookSecret, sessionWebhookEvent, signWebhook } from '../../src/testing/webhook-signing.js';
import { createWebhookHandler, type WebhookHandler } from '../../src/webhook/index.js';
import { EnvironmentWorker } from '../../src/worker/environment-worker.js';

const MAX_BODY_BYTES = 64 * 1024;
/** Signature headers that look like a delivery's, so the size limit (not the missing signature) decides. */
const SIGNED_LOOKING = {
  'webhook-id': 'msg_big',
  'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
  'webhook-signature': 'v1,AAAA',
};

describe('webhook deliveries that go wrong', () => {
  let dir: string;
  let emu: Emulator;
  let worker: EnvironmentWorker;
  let handler: WebhookHandler;
  let server: http.Server;
  let url: URL;
  const sockets: Socket[] = [];
  const secret = generateWebhookSecret();

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-webhook-abuse-'));
    emu = await startEmulator({ mountRoot: dir, leaseTtlSeconds: 4 });
    worker = new EnvironmentWorker({ client: emu.client(), workdir: dir, logger: createLogger({ level: 'silent' }), maxIdleMs: 2_000 });
    handler = createWebhookHandler({
      worker,
      client: emu.client(),
      webhookSecret: secret,
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      maxBodyBytes: MAX_BODY_BYTES,
      logger: createLogger({ level: 'silent' }),
    });
    server = http.createServer(handler);
    server.on('connection', (s) => sockets.push(s));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/webhook`);
  });

  afterEach(async () => {
    sockets.length = 0;
    await handler.close({ abortItems: true });
    await worker.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('runs a redelivery whose first drain gave up, instead of answering "duplicate" while the item stays queued', async () => {
    const { sessionId, workId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo redelivered' } }] });
    // The first drain's poll is refused: the drain gives up with the item still queued.
    emu.faults.add({ route: /\/work\/poll$/, status: 401, times: 1 });
    const signed = signWebhook(sessionWebhookEvent(sessionId), secret);
    const first = await handler.handle({ headers: signed.headers, body: signed.body });
    expect(first.status).toBe(202);
    await handler.idle();
    expect(emu.workItem(workId).state).toBe('queued');

    const again = await handler.handle({ headers: signed.headers, body: signed.body });
    expect(again).toEqual({ status: 202, body: JSON.stringify({ accepted: true }) });
    const done = await emu.waitForSession(sessionId, { timeoutMs: 20_000 });
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['redelivered']);
    expect(done.workStopped).toBe(true);
  });

  it('cuts off a streamed body as soon as it passes maxBodyBytes: 413, connection closed, little more than the limit read', async () => {
    const sentLimit = 32 * 1024 * 1024;
    let sent = 0;
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const body = new Readable({
      read() {
        if (sent >= sentLimit) return void this.push(null);
        sent += chunk.length;
        this.push(chunk);
      },
    });
    const result = await new Promise<{ status?: number; error?: string }>((resolve) => {
      const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...SIGNED_LOOKING } }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode! }));
        res.on('error', () => resolve({ status: res.statusCode! }));
      });
      req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
      body.pipe(req);
    });
    body.destroy();
    // The client sees the 413, or its upload is cut (the socket was destroyed under it).
    if (result.status !== undefined) expect(result.status).toBe(413);
    else expect(['ECONNRESET', 'EPIPE']).toContain(result.error);
    await new Promise((r) => setTimeout(r, 200));
    const bytesRead = sockets.reduce((n, s) => n + s.bytesRead, 0);
    expect(sockets.every((s) => s.destroyed)).toBe(true);
    // Kernel and stream buffers may hold a few chunks past the limit; the client offered 32 MiB.
    expect(bytesRead).toBeLessThan(MAX_BODY_BYTES + 4 * 1024 * 1024);
    expect(sent).toBeLessThan(sentLimit);
  });

  it('refuses a body whose declared length is over maxBodyBytes before reading any of it', async () => {
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request(
        url,
        {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': String(MAX_BODY_BYTES + 1), ...SIGNED_LOOKING },
        },
        resolve,
      );
      req.on('error', reject);
      req.write('{');
    });
    expect(res.statusCode).toBe(413);
    expect(res.headers['connection']).toBe('close');
    res.resume();
    await new Promise((r) => res.on('close', r));
    expect(emu.requests.filter((r) => r.route.endsWith('/work/poll'))).toHaveLength(0);
  });

  it('refuses an unsigned request with 401 before reading its body', async () => {
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request(
        url,
        { method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } },
        resolve,
      );
      req.on('error', reject);
      // A body that never ends: only an answer that does not wait for it arrives.
      req.write('{"type":"event"');
    });
    expect(res.statusCode).toBe(401);
    res.resume();
    await new Promise((r) => res.on('close', r));
    expect(sockets.every((s) => s.destroyed)).toBe(true);
  });

  it('refuses an oversized body handed to handle() with 413', async () => {
    const signed = signWebhook(sessionWebhookEvent('sesn_x'), secret);
    const padded = signed.body.replace('}', `,"pad":"${'x'.repeat(MAX_BODY_BYTES)}"}`);
    expect((await handler.handle({ headers: signed.headers, body: padded })).status).toBe(413);
  });
});
