/** Hostile cases against the webhook endpoint: forged, stale, malformed and oversized deliveries. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import { generateWebhookSecret, sessionWebhookEvent, signWebhook } from '../../src/testing/webhook-signing.js';
import { createWebhookHandler, type WebhookHandler } from '../../src/webhook/index.js';
import type { Ctx, HostileCase } from './hostile-kit.js';

const SECRET = generateWebhookSecret();
const MAX_BODY_BYTES = 64 * 1024;

/** A handler whose worker must never be asked to run anything. */
function handlerFor(ctx: Ctx): WebhookHandler {
  ctx.secrets.push(SECRET);
  return createWebhookHandler({
    worker: {
      handleItem: () => {
        throw new Error('a refused delivery must not run work');
      },
    },
    client: ctx.emu.client(),
    webhookSecret: SECRET,
    environmentId: ctx.emu.environmentId,
    environmentKey: ctx.emu.environmentKey,
    maxBodyBytes: MAX_BODY_BYTES,
    logger: ctx.log.logger,
  });
}

function delivery(description: string, build: () => { headers: Record<string, string>; body: string }, status: number, says: RegExp): HostileCase {
  return {
    group: 'webhook abuse',
    description,
    async run(ctx) {
      const handler = handlerFor(ctx);
      await ctx.armed();
      const req = build();
      const res = await handler.handle(req);
      ctx.answers.push(`webhook ${req.headers['webhook-id'] ?? '(no id)'} answered ${res.status}: ${res.body}`);
      expect(res.status).toBe(status);
      await handler.close();
      expect(ctx.emu.workItems().filter((w) => w.state !== 'queued')).toEqual([]);
    },
    expects: { path: 'msg_hostile', says },
  };
}

const event = (): ReturnType<typeof sessionWebhookEvent> => ({ ...sessionWebhookEvent('sesn_hostile'), id: 'msg_hostile' });

export const webhookCases: HostileCase[] = [
  delivery('an unsigned delivery', () => ({ headers: { 'webhook-id': 'msg_hostile', 'content-type': 'application/json' }, body: JSON.stringify(event()) }), 401, /signature/),
  delivery('a delivery signed with another secret', () => signWebhook(event(), generateWebhookSecret()), 401, /signature/),
  delivery('a replayed delivery an hour old', () => signWebhook(event(), SECRET, { timestampSeconds: Math.floor(Date.now() / 1000) - 3600 }), 401, /signature/),
  delivery('a signature over a different body', () => {
    const signed = signWebhook(event(), SECRET);
    return { ...signed, body: signed.body.replace('run_started', 'run_startee') };
  }, 401, /signature/),
  {
    group: 'webhook abuse',
    description: 'a body far over maxBodyBytes, over HTTP',
    async run(ctx) {
      const handler = handlerFor(ctx);
      const server = http.createServer(handler);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      await ctx.armed();
      try {
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhook`;
        const signed = signWebhook({ ...event(), pad: 'p'.repeat(4 * MAX_BODY_BYTES) }, SECRET);
        const res = await fetch(url, { method: 'POST', headers: signed.headers, body: signed.body }).catch((e: unknown) => e);
        if (res instanceof Response) {
          ctx.answers.push(`webhook msg_hostile answered ${res.status}: ${await res.text()}`);
          expect(res.status).toBe(413);
        } else {
          // Cut off before the body was sent whole: the connection was closed on the sender.
          ctx.answers.push(`webhook msg_hostile cut off: body over ${MAX_BODY_BYTES} bytes`);
        }
      } finally {
        await handler.close();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
    },
    expects: { path: 'msg_hostile', says: new RegExp(`body over ${MAX_BODY_BYTES} bytes`) },
  },
];
