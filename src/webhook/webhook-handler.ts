import type { IncomingMessage, ServerResponse } from 'node:http';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { statusOf } from '../api/classify.js';
import { coerceError } from '../errors.js';
import { sleepUnlessAborted } from '../internal/abort.js';
import { errorSummary, resolveLogger } from '../internal/logger.js';
import { decodeWorkSecret } from '../worker/credentials.js';
import { scopedClient } from '../worker/scoped-client.js';
import { stopUnservedWork } from '../worker/stop-work.js';
import { DeliveryIds } from './delivery-ids.js';
import { claimOne, type ClaimedItem } from './drain-queue.js';
import { resolveWebhookHandlerOptions, type WebhookHandlerOptions } from './options.js';
import { answerAndClose, readBody } from './read-body.js';

export type { WebhookHandlerOptions, WebhookWorker } from './options.js';

/** A framework-neutral request: the raw body (verification is over its exact bytes) and headers. */
export interface WebhookRequest {
  /** The request's headers (names in any case); the `webhook-*` signature headers are read from them. */
  headers: Record<string, string | string[] | undefined>;
  /** The raw request body, exactly as received. */
  body: string;
}

/** The answer to one delivery, for the caller to send. */
export interface WebhookResponse {
  /** HTTP status: 202 accepted, 200 ignored (another event type, a redelivery), 401 bad signature, 413 too large, 503 closing or no sandbox. */
  status: number;
  /** A JSON body saying what happened. */
  body: string;
}

/** A webhook endpoint: a `node:http` request listener that also answers framework-neutral requests through `handle()`. */
export interface WebhookHandler {
  /** The `node:http` listener: `http.createServer(handler)`. */
  (req: IncomingMessage, res: ServerResponse): void;
  /** Answer one delivery; the work it starts runs in the background. */
  handle(req: WebhookRequest): Promise<WebhookResponse>;
  /** Stop accepting (503), stop draining, wait for running items. `abortItems` aborts them first. Idempotent. */
  close(opts?: { abortItems?: boolean }): Promise<void>;
  /** Resolves when no drain and no item is running (tests, graceful shutdown). */
  idle(): Promise<void>;
  /** Work items running now. */
  readonly activeItems: number;
}

const json = (status: number, body: unknown): WebhookResponse => ({ status, body: JSON.stringify(body) });

/**
 * Turn an `EnvironmentWorker` into a webhook endpoint: verify each delivery, answer at once, and
 * drain the environment's queue in the background (poll + ack with the environment key, then
 * `handleItem` with the item's secret forwarded). A redelivery of a webhook id whose drain reached
 * the end of the queue is answered 200 and ignored; one whose drain gave up drains again. While
 * closing, deliveries get 503 so the sender retries elsewhere or later. The options are validated
 * up front: every problem in one ConfigError, unknown keys refused.
 */
export function createWebhookHandler(options: WebhookHandlerOptions): WebhookHandler {
  const o = resolveWebhookHandlerOptions(options);
  const workerId = o.workerId ?? `${hostname()}-webhook-${randomUUID()}`;
  const log = resolveLogger(o.logger).child({ component: 'webhook' });
  const envClient = scopedClient(o.client, o.environmentKey);

  const deliveries = new DeliveryIds(o.dedupeWindow);
  const items = new Set<Promise<void>>();
  const itemsAbort = new AbortController();
  const drainAbort = new AbortController();
  let draining: Promise<void> | undefined;
  let drainAgain = false;
  let closing = false;
  let closed: Promise<void> | undefined;
  let slotFreed: (() => void) | undefined;

  function startItem(item: ClaimedItem): void {
    const ilog = log.child({ work_id: item.workId, session_id: item.sessionId });
    if (item.sessionId === undefined) {
      ilog.info({ type: item.dataType }, 'acknowledged a work item that is not a session; stopping it, nothing to run');
      track(stopUnservedWork(envClient, item, ilog).then(() => undefined));
      return;
    }
    const run = o.worker
      .handleItem({
        workId: item.workId,
        environmentId: item.environmentId,
        sessionId: item.sessionId,
        // The item is served with its own sessions token; the key only for an item without one.
        ...(decodeWorkSecret(item.secret).status === 'token' ? {} : { environmentKey: o.environmentKey }),
        ...(item.secret !== undefined ? { workSecret: item.secret } : {}),
        signal: itemsAbort.signal,
      })
      .then(
        (outcome) => ilog.info({ status: outcome.status, duration_ms: outcome.durationMs }, 'work item finished'),
        (err: unknown) => ilog.error({ err: coerceError(err), status: 'failed' }, 'work item failed'),
      );
    track(run);
  }

  /** Count `p` among the running items until it settles (idle() and close() wait for it). */
  function track(p: Promise<void>): void {
    const tracked: Promise<void> = p.finally(() => {
      items.delete(tracked);
      slotFreed?.();
    });
    items.add(tracked);
  }

  async function waitForSlot(): Promise<void> {
    while (items.size >= o.concurrency && !drainAbort.signal.aborted) {
      await new Promise<void>((resolve) => {
        const onAbort = (): void => resolve();
        slotFreed = () => {
          drainAbort.signal.removeEventListener('abort', onAbort);
          resolve();
        };
        drainAbort.signal.addEventListener('abort', onAbort, { once: true });
      });
      slotFreed = undefined;
    }
  }

  /** One pass over the queue: `drained` once a poll finds it empty, `gave_up` when claiming failed for good. */
  async function drainOnce(): Promise<'drained' | 'gave_up' | 'aborted'> {
    let failures = 0;
    while (!drainAbort.signal.aborted) {
      await waitForSlot();
      if (drainAbort.signal.aborted) return 'aborted';
      let item: ClaimedItem | undefined;
      try {
        item = await claimOne(envClient, o.environmentId, { workerId, signal: drainAbort.signal });
        failures = 0;
      } catch (err) {
        if (drainAbort.signal.aborted) return 'aborted';
        const status = statusOf(err);
        if (status === 401 || status === 403) {
          // A refused key is refused again: say which setting to fix instead of retrying.
          log.error(
            { err: coerceError(err), status, environment_id: o.environmentId },
            `the environment key was refused (HTTP ${status}) while claiming work from environment ${o.environmentId}; ` +
              `items stay queued. Check that ANTHROPIC_ENVIRONMENT_KEY (the handler's environmentKey option) is the key of environment ${o.environmentId}`,
          );
          return 'gave_up';
        }
        failures += 1;
        if (failures > 3) {
          log.warn(
            { error: errorSummary(coerceError(err)), environment_id: o.environmentId },
            'claiming work failed 4 times; items stay queued until the next delivery',
          );
          return 'gave_up';
        }
        log.warn({ error: errorSummary(coerceError(err)), attempt: failures }, 'claiming work failed; retrying');
        await sleepUnlessAborted(1000 * 2 ** (failures - 1), drainAbort.signal);
        continue;
      }
      if (!item) return 'drained';
      startItem(item);
    }
    return 'aborted';
  }

  function scheduleDrain(): void {
    if (draining) {
      // A delivery during a drain: run one more pass after it, so no item announced now is missed.
      drainAgain = true;
      return;
    }
    draining = runDrains();
  }

  async function runDrains(): Promise<void> {
    try {
      do {
        drainAgain = false;
        const ids = deliveries.takePending();
        const result = await drainOnce();
        deliveries.settle(ids, result === 'drained');
        if (result !== 'drained' && ids.length > 0) {
          log.info({ webhook_ids: ids, result }, 'drain did not reach the end of the queue; a redelivery of these webhooks drains again');
        }
      } while (drainAgain && !drainAbort.signal.aborted);
    } finally {
      // In the same step as the last check: a delivery from now on starts a drain of its own.
      draining = undefined;
    }
  }

  let ready: Promise<string | undefined> | undefined;
  /**
   * Why the worker may not serve sessions from the queue (no working sandbox with `'auto'`), found
   * once before the first claim and logged once; `undefined` when it may. Nothing is claimed
   * without it: every delivery is answered 503 with the reason, so the sender retries later.
   */
  function readiness(): Promise<string | undefined> {
    ready ??= Promise.resolve(o.worker.readyToServe?.()).then(
      () => undefined,
      (err: unknown) => {
        const e = coerceError(err);
        log.error({ err: e }, `the webhook handler serves no session: ${e.message}`);
        return e.message;
      },
    );
    return ready;
  }

  async function handle(req: WebhookRequest): Promise<WebhookResponse> {
    if (closing || o.worker.closing) return json(503, { error: 'shutting down; deliver again later' });
    if (Buffer.byteLength(req.body, 'utf8') > o.maxBodyBytes) return json(413, { error: `body over ${o.maxBodyBytes} bytes` });
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (v !== undefined) headers[k.toLowerCase()] = Array.isArray(v) ? (v[0] ?? '') : v;
    }
    let event: { id?: string; data?: { type?: string; id?: string } };
    try {
      event = o.client.beta.webhooks.unwrap(req.body, { headers, key: o.webhookSecret }) as typeof event;
    } catch (err) {
      log.warn(
        { webhook_id: headers['webhook-id'], reason: coerceError(err).message },
        'webhook delivery refused: bad or missing signature',
      );
      return json(401, { error: 'invalid signature' });
    }
    const type = event.data?.type;
    if (type === undefined || !o.eventTypes.has(type)) {
      log.debug({ type }, 'webhook event type ignored');
      return json(200, { ignored: type ?? null });
    }
    const unready = await readiness();
    if (unready !== undefined) return json(503, { error: 'sandbox_unavailable', message: unready });
    const webhookId = headers['webhook-id'] ?? event.id ?? '';
    if (deliveries.isDone(webhookId)) {
      log.info({ webhook_id: webhookId }, 'webhook redelivery ignored: its drain already reached the end of the queue');
      return json(200, { duplicate: true });
    }
    deliveries.accept(webhookId);
    log.info({ webhook_id: webhookId, type, session_id: event.data?.id }, 'webhook accepted; draining the queue');
    scheduleDrain();
    return json(202, { accepted: true });
  }

  const handler = ((req: IncomingMessage, res: ServerResponse): void => {
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST', 'content-type': 'application/json' }).end(JSON.stringify({ error: 'POST only' }));
      return;
    }
    if (req.headers['webhook-signature'] === undefined) {
      // Unsigned: refused like a bad signature, without reading a byte of the body.
      log.warn({ webhook_id: req.headers['webhook-id'] }, 'webhook delivery refused: no webhook-signature header');
      answerAndClose(req, res, 401, { error: 'invalid signature' });
      return;
    }
    const respond = (r: WebhookResponse): void => {
      res.writeHead(r.status, { 'content-type': 'application/json' }).end(r.body);
    };
    readBody(req, res, o.maxBodyBytes)
      .then((read) => {
        if (read.status === 'too_large') {
          log.warn(
            { max_body_bytes: o.maxBodyBytes, bytes_read: read.bytesRead },
            'webhook request refused: body over maxBodyBytes; connection closed',
          );
          return;
        }
        if (read.status === 'ok') return handle({ headers: req.headers, body: read.body.toString('utf8') }).then(respond);
      })
      .catch((err: unknown) => {
        log.error({ err: coerceError(err) }, 'webhook handler failed');
        if (!res.headersSent) respond(json(500, { error: 'internal error' }));
      });
  }) as WebhookHandler;

  async function idle(): Promise<void> {
    while (draining || items.size > 0) {
      await Promise.allSettled([draining, ...items]);
    }
  }

  handler.handle = handle;
  handler.idle = idle;
  handler.close = (opts = {}) => {
    closing = true;
    if (opts.abortItems) itemsAbort.abort(new Error('webhook handler closed'));
    closed ??= (async () => {
      drainAbort.abort(new Error('webhook handler closed'));
      await idle();
    })();
    return closed;
  };
  Object.defineProperty(handler, 'activeItems', { get: () => items.size });
  return handler;
}
