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

function delivery(
  description: string,
  build: () => { headers: Record<string, string>; body: string },
  status: number,
  says: RegExp,
): HostileCase {
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

/** Send raw headers and a first chunk over HTTP; resolve with the status (or the error) the handler answers. */
function rawPost(ctx: Ctx, headers: Record<string, string>, firstChunk: string): HostileCase['run'] {
  return async () => {
    const handler = handlerFor(ctx);
    const server = http.createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    await ctx.armed();
    try {
      const port = (server.address() as AddressInfo).port;
      const answer = await new Promise<string>((resolve) => {
        const req = http.request({ host: '127.0.0.1', port, path: '/webhook', method: 'POST', headers }, (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString('utf8')));
          res.on('end', () => resolve(`${res.statusCode}: ${text}`));
          res.on('error', () => resolve(`${res.statusCode}: (cut)`));
        });
        req.on('error', (e: NodeJS.ErrnoException) => resolve(`error ${e.code ?? e.message}`));
        // The body never ends: only an answer that does not wait for it arrives.
        req.write(firstChunk);
      });
      ctx.answers.push(`webhook ${headers['webhook-id'] ?? 'msg_hostile'} answered ${answer}`);
      expect(answer).toMatch(/^(401|413)/);
    } finally {
      await handler.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  };
}

export const webhookCases: HostileCase[] = [
  delivery(
    'an unsigned delivery',
    () => ({ headers: { 'webhook-id': 'msg_hostile', 'content-type': 'application/json' }, body: JSON.stringify(event()) }),
    401,
    /signature/,
  ),
  delivery('a delivery signed with another secret', () => signWebhook(event(), generateWebhookSecret()), 401, /signature/),
  delivery(
    'a replayed delivery an hour old',
    () => signWebhook(event(), SECRET, { timestampSeconds: Math.floor(Date.now() / 1000) - 3600 }),
    401,
    /signature/,
  ),
  delivery(
    'a signature over a different body',
    () => {
      const signed = signWebhook(event(), SECRET);
      return { ...signed, body: signed.body.replace('run_started', 'run_startee') };
    },
    401,
    /signature/,
  ),
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
  {
    group: 'webhook abuse',
    description: 'an unsigned request whose body never ends, over HTTP',
    run: (ctx) =>
      rawPost(
        ctx,
        { 'content-type': 'application/json', 'transfer-encoding': 'chunked', 'webhook-id': 'msg_hostile' },
        '{"type":"event"',
      )(ctx),
    expects: { path: 'msg_hostile', says: /^webhook msg_hostile answered 401/ },
  },
  {
    group: 'webhook abuse',
    description: 'a body declaring a length over maxBodyBytes, over HTTP',
    run: (ctx) =>
      rawPost(
        ctx,
        {
          'content-type': 'application/json',
          'content-length': String(MAX_BODY_BYTES * 100),
          'webhook-id': 'msg_hostile',
          'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
          'webhook-signature': 'v1,AAAA',
        },
        '{',
      )(ctx),
    expects: { path: 'msg_hostile', says: /^webhook msg_hostile answered 413/ },
  },
];
