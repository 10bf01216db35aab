// Pins the webhook mode end to end against the emulator: a signed delivery is answered 202 before
// the session runs, the queue is drained in the background and each item runs with its secret
// forwarded (the worker talks with the sessions token); an unsigned or wrongly signed delivery
// gets 401 and claims nothing; a redelivery is answered 200 once its drain reached the end of the
// queue, drains again before that, and runs nothing twice; other event types get 200 and are
// ignored; while closing, deliveries get 503.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/internal/logger.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { generateWebhookSecret, postWebhooksTo, sessionWebhookEvent, signWebhook } from '../../src/testing/webhook-signing.js';
import { createWebhookHandler, type WebhookHandler } from '../../src/webhook/index.js';
import { EnvironmentWorker } from '../../src/worker/environment-worker.js';

describe('createWebhookHandler', () => {
  let dir: string;
  let emu: Emulator;
  let worker: EnvironmentWorker;
  let handler: WebhookHandler;
  let server: http.Server;
  let url: string;
  const secret = generateWebhookSecret();

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-webhook-'));
    emu = await startEmulator({ mountRoot: dir, leaseTtlSeconds: 4 });
    worker = new EnvironmentWorker({ client: emu.client(), workdir: dir, logger: createLogger({ level: 'silent' }), maxIdleMs: 2_000 });
    handler = createWebhookHandler({
      worker,
      client: emu.client(),
      webhookSecret: secret,
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      logger: createLogger({ level: 'silent' }),
    });
    server = http.createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhook`;
  });

  afterEach(async () => {
    await handler.close({ abortItems: true });
    await worker.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('answers a signed delivery before the session runs, then serves it with the forwarded secret', async () => {
    const poster = postWebhooksTo(emu, url, secret);
    const { sessionId, workId } = await emu.createSession({
      script: [{ sleepMs: 300 }, { tool: 'bash', input: { command: 'echo served' } }],
    });
    await poster.settled();
    expect(poster.deliveries).toHaveLength(1);
    expect(poster.deliveries[0]!.status).toBe(202);
    // Answered before the session ended: the agent sleeps 300 ms before its first call.
    expect(emu.session(sessionId).status).not.toBe('terminated');

    const done = await emu.waitForSession(sessionId, { timeoutMs: 20_000 });
    expect(done.status).toBe('terminated');
    expect(done.workStopped).toBe(true);
    expect(done.toolResults.map((r) => [r.name, r.isError, r.text.trim()])).toEqual([['bash', false, 'served']]);
    // The secret was forwarded: the item's heartbeats and stop used the sessions token, not the environment key.
    const itemCalls = emu.requests.filter((r) => r.path.includes(`/work/${workId}/`) && /heartbeat|stop/.test(r.route));
    expect(itemCalls.length).toBeGreaterThan(0);
    expect(new Set(itemCalls.map((r) => r.credential))).toEqual(new Set(['sessions_token']));
    // Polls and the ack used the environment key.
    const claims = emu.requests.filter((r) => /work\/poll|\/ack/.test(r.route));
    expect(new Set(claims.map((r) => r.credential))).toEqual(new Set(['environment_key']));
    poster.stop();
  });

  it('refuses unsigned and wrongly signed deliveries with 401 and claims nothing', async () => {
    const { sessionId, workId } = await emu.createSession({ script: [] });
    const event = sessionWebhookEvent(sessionId);
    const unsigned = await fetch(url, { method: 'POST', body: JSON.stringify(event), headers: { 'content-type': 'application/json' } });
    expect(unsigned.status).toBe(401);
    const wrong = signWebhook(event, generateWebhookSecret());
    const badSig = await fetch(url, { method: 'POST', body: wrong.body, headers: wrong.headers });
    expect(badSig.status).toBe(401);
    await handler.idle();
    expect(emu.workItem(workId).deliveries).toBe(0);
  });

  it('answers a redelivery 200 once its drain reached the end of the queue, and runs nothing twice', async () => {
    const { sessionId, workId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo once' } }] });
    const signed = signWebhook(sessionWebhookEvent(sessionId), secret);
    const first = await fetch(url, { method: 'POST', body: signed.body, headers: signed.headers });
    expect(first.status).toBe(202);
    const done = await emu.waitForSession(sessionId, { timeoutMs: 20_000 });
    await handler.idle();
    const polls = emu.requests.filter((r) => r.route.endsWith('/work/poll')).length;
    const again = await fetch(url, { method: 'POST', body: signed.body, headers: signed.headers });
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ duplicate: true });
    await handler.idle();
    expect(emu.requests.filter((r) => r.route.endsWith('/work/poll'))).toHaveLength(polls);
    expect(done.toolResults).toHaveLength(1);
    expect(emu.workItem(workId).deliveries).toBe(1);
  });

  it('drains again for a redelivery that arrives while its first drain still runs, and runs the item once', async () => {
    const { sessionId, workId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo once' } }] });
    const signed = signWebhook(sessionWebhookEvent(sessionId), secret);
    const [first, again] = await Promise.all([
      fetch(url, { method: 'POST', body: signed.body, headers: signed.headers }),
      fetch(url, { method: 'POST', body: signed.body, headers: signed.headers }),
    ]);
    expect([first.status, again.status]).toEqual([202, 202]);
    const done = await emu.waitForSession(sessionId, { timeoutMs: 20_000 });
    expect(done.toolResults).toHaveLength(1);
    expect(emu.workItem(workId).deliveries).toBe(1);
  });

  it('logs a failed item (handleItem rejects), leaves no unhandled rejection, and serves the next one', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown): void => void unhandled.push(e);
    process.on('unhandledRejection', onUnhandled);
    try {
      const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } });
      // Memory on, stores attached, no secret on the item: the item fails.
      const bad = await emu.createSession({
        resources: [{ memoryStoreId: store.id }],
        script: [{ tool: 'bash', input: { command: 'true' } }],
        secret: false,
        end: 'idle',
      });
      const badSigned = signWebhook(sessionWebhookEvent(bad.sessionId), secret);
      expect((await fetch(url, { method: 'POST', body: badSigned.body, headers: badSigned.headers })).status).toBe(202);
      await handler.idle();
      expect(emu.workItem(bad.workId).stopped).toBe(true);
      expect(emu.session(bad.sessionId).toolResults).toEqual([]);
      emu.archiveSession(bad.sessionId);

      const good = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo next' } }] });
      const goodSigned = signWebhook(sessionWebhookEvent(good.sessionId), secret);
      expect((await fetch(url, { method: 'POST', body: goodSigned.body, headers: goodSigned.headers })).status).toBe(202);
      const done = await emu.waitForSession(good.sessionId, { timeoutMs: 20_000 });
      expect(done.toolResults.map((r) => r.text.trim())).toEqual(['next']);
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('ignores other event types with 200', async () => {
    const signed = signWebhook(sessionWebhookEvent('sesn_x', 'session.status_idled'), secret);
    const res = await fetch(url, { method: 'POST', body: signed.body, headers: signed.headers });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ignored: 'session.status_idled' });
    await handler.idle();
    expect(emu.requests.filter((r) => r.route.includes('work/poll'))).toHaveLength(0);
  });

  it('answers 503 once shutting down', async () => {
    await handler.close();
    const signed = signWebhook(sessionWebhookEvent('sesn_x'), secret);
    const res = await fetch(url, { method: 'POST', body: signed.body, headers: signed.headers });
    expect(res.status).toBe(503);
  });
});
