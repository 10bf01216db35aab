import type { IncomingMessage, ServerResponse } from 'node:http';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type Anthropic from '@anthropic-ai/sdk';
import { statusOf } from '../api/classify.js';
import { ConfigError, coerceError } from '../errors.js';
import { sleepUnlessAborted } from '../internal/abort.js';
import { resolveLogger, type Logger } from '../internal/logger.js';
import type { ItemOutcome } from '../worker/events.js';
import { scopedClient } from '../worker/scoped-client.js';
import { claimOne, type ClaimedItem } from './drain-queue.js';

/**
 * The part of `EnvironmentWorker` the webhook handler drives. `handleItem` resolves with the outcome,
 * or rejects (WorkItemFailedError) when the item failed; the handler logs either and never lets the
 * rejection go unhandled.
 */
export interface WebhookWorker {
  handleItem(opts: {
    workId: string;
    environmentId: string;
    sessionId: string;
    environmentKey?: string;
    workSecret?: string;
    signal?: AbortSignal;
  }): Promise<ItemOutcome>;
  readonly closing?: boolean;
}

export interface WebhookHandlerOptions {
  /** Runs each claimed item (`handleItem`). Build it with the same options as a poll daemon. */
  worker: WebhookWorker;
  /** An SDK client: verifies deliveries (`beta.webhooks.unwrap`) and, re-keyed, polls the queue. */
  client: Anthropic;
  /** The endpoint's signing secret (`whsec_…`). */
  webhookSecret: string;
  /** The self-hosted environment whose queue a delivery drains. */
  environmentId: string;
  /** The environment key: polls and acks use it; forwarded to `handleItem` for items without a secret. */
  environmentKey: string;
  /** Webhook event types (`data.type`) that trigger a drain. Default: `session.status_run_started`. Others get 200 and are ignored. */
  eventTypes?: readonly string[];
  /** Items run at once by this handler. Default 1, at most 64. */
  concurrency?: number;
  /** Largest accepted body, bytes. Default 1 MiB (413 above). */
  maxBodyBytes?: number;
  /** How many webhook ids are remembered to drop redeliveries. Default 10 000. */
  dedupeWindow?: number;
  /** Sent as `Anthropic-Worker-ID` on polls. Default `<hostname>-webhook-<uuid>`. */
  workerId?: string;
  logger?: Logger;
}

/** A framework-neutral request: the raw body (verification is over its exact bytes) and headers. */
export interface WebhookRequest {
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface WebhookResponse {
  status: number;
  body: string;
}

export interface WebhookHandler {
  /** The `node:http` listener: `http.createServer(handler)`. */
  (req: IncomingMessage, res: ServerResponse): void;
  /** Answer one delivery; the work it starts runs in the background. */
  handle(req: WebhookRequest): Promise<WebhookResponse>;
  /** Stop accepting (503), stop draining, wait for running items. `abortItems` aborts them first. Idempotent. */
  close(opts?: { abortItems?: boolean }): Promise<void>;
  /** Resolves when no drain and no item is running (tests, graceful shutdown). */
  idle(): Promise<void>;
  readonly activeItems: number;
}

const json = (status: number, body: unknown): WebhookResponse => ({ status, body: JSON.stringify(body) });

/**
 * Turn an `EnvironmentWorker` into a webhook endpoint: verify each delivery, answer at once, and
 * drain the environment's queue in the background (poll + ack with the environment key, then
 * `handleItem` with the item's secret forwarded). Redeliveries of one webhook id are answered 200
 * and ignored; while closing, deliveries get 503 so the sender retries elsewhere or later.
 */
export function createWebhookHandler(options: WebhookHandlerOptions): WebhookHandler {
  for (const key of ['webhookSecret', 'environmentId', 'environmentKey'] as const) {
    if (!options[key]) throw new ConfigError(`createWebhookHandler: ${key} is required (got an empty value); pass it from your configuration`);
  }
  const concurrency = options.concurrency ?? 1;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64) {
    throw new ConfigError(`createWebhookHandler: concurrency: expected an integer from 1 to 64, got ${String(concurrency)}`);
  }
  const eventTypes = new Set(options.eventTypes ?? ['session.status_run_started']);
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const dedupeWindow = options.dedupeWindow ?? 10_000;
  const workerId = options.workerId ?? `${hostname()}-webhook-${randomUUID()}`;
  const log = resolveLogger(options.logger).child({ scope: 'webhook' });
  const envClient = scopedClient(options.client, options.environmentKey);

  const seen = new Set<string>();
  const items = new Set<Promise<void>>();
  const itemsAbort = new AbortController();
  const drainAbort = new AbortController();
  let draining: Promise<void> | undefined;
  let drainAgain = false;
  let closing = false;
  let closed: Promise<void> | undefined;
  let slotFreed: (() => void) | undefined;

  function remember(id: string): boolean {
    if (seen.has(id)) return false;
    seen.add(id);
    if (seen.size > dedupeWindow) seen.delete(seen.values().next().value as string);
    return true;
  }

  function startItem(item: ClaimedItem): void {
    const ilog = log.child({ workId: item.workId, sessionId: item.sessionId });
    if (item.sessionId === undefined) {
      ilog.info({ type: item.dataType }, 'acknowledged a non-session work item; nothing to run');
      return;
    }
    const run = options.worker
      .handleItem({
        workId: item.workId,
        environmentId: item.environmentId,
        sessionId: item.sessionId,
        environmentKey: options.environmentKey,
        ...(item.secret !== undefined ? { workSecret: item.secret } : {}),
        signal: itemsAbort.signal,
      })
      .then(
        (outcome) => ilog.info({ status: outcome.status, durationMs: outcome.durationMs }, 'work item finished'),
        (err: unknown) => ilog.error({ err: coerceError(err), status: 'failed' }, 'work item failed'),
      )
      .finally(() => {
        items.delete(run);
        slotFreed?.();
      });
    items.add(run);
  }

  async function waitForSlot(): Promise<void> {
    while (items.size >= concurrency && !drainAbort.signal.aborted) {
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

  async function drainOnce(): Promise<void> {
    let failures = 0;
    while (!drainAbort.signal.aborted) {
      await waitForSlot();
      if (drainAbort.signal.aborted) return;
      let item: ClaimedItem | undefined;
      try {
        item = await claimOne(envClient, options.environmentId, { workerId, signal: drainAbort.signal });
        failures = 0;
      } catch (err) {
        if (drainAbort.signal.aborted) return;
        const status = statusOf(err);
        if (status === 401 || status === 403) {
          // A refused key is refused again: say which setting to fix instead of retrying.
          log.error(
            { err: coerceError(err), status, environmentId: options.environmentId },
            `the environment key was refused (HTTP ${status}) while claiming work from environment ${options.environmentId}; ` +
              `items stay queued. Check that ANTHROPIC_ENVIRONMENT_KEY (the handler's environmentKey option) is the key of environment ${options.environmentId}`,
          );
          return;
        }
        failures += 1;
        if (failures > 3) {
          log.warn({ err: coerceError(err), environmentId: options.environmentId }, 'claiming work failed 4 times; items stay queued until the next delivery');
          return;
        }
        log.warn({ err: coerceError(err), attempt: failures }, 'claiming work failed; retrying');
        await sleepUnlessAborted(1000 * 2 ** (failures - 1), drainAbort.signal);
        continue;
      }
      if (!item) return;
      startItem(item);
    }
  }

  function scheduleDrain(): void {
    if (draining) {
      // A delivery during a drain: run one more pass after it, so no item announced now is missed.
      drainAgain = true;
      return;
    }
    draining = (async () => {
      do {
        drainAgain = false;
        await drainOnce();
      } while (drainAgain && !drainAbort.signal.aborted);
    })().finally(() => {
      draining = undefined;
    });
  }

  async function handle(req: WebhookRequest): Promise<WebhookResponse> {
    if (closing || options.worker.closing) return json(503, { error: 'shutting down; deliver again later' });
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (v !== undefined) headers[k.toLowerCase()] = Array.isArray(v) ? (v[0] ?? '') : v;
    }
    let event: { id?: string; data?: { type?: string; id?: string } };
    try {
      event = options.client.beta.webhooks.unwrap(req.body, { headers, key: options.webhookSecret }) as typeof event;
    } catch (err) {
      log.warn({ webhookId: headers['webhook-id'], reason: coerceError(err).message }, 'webhook delivery refused: bad or missing signature');
      return json(401, { error: 'invalid signature' });
    }
    const type = event.data?.type;
    if (type === undefined || !eventTypes.has(type)) {
      log.debug({ type }, 'webhook event type ignored');
      return json(200, { ignored: type ?? null });
    }
    const webhookId = headers['webhook-id'] ?? event.id ?? '';
    if (!remember(webhookId)) {
      log.info({ webhookId }, 'webhook redelivery ignored');
      return json(200, { duplicate: true });
    }
    log.info({ webhookId, type, sessionId: event.data?.id }, 'webhook accepted; draining the queue');
    scheduleDrain();
    return json(202, { accepted: true });
  }

  const handler = ((req: IncomingMessage, res: ServerResponse): void => {
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST', 'content-type': 'application/json' }).end(JSON.stringify({ error: 'POST only' }));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBodyBytes) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on('error', () => res.destroy());
    req.on('end', () => {
      const answer = tooLarge
        ? Promise.resolve(json(413, { error: `body over ${maxBodyBytes} bytes` }))
        : handle({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      answer.then(
        (r) => res.writeHead(r.status, { 'content-type': 'application/json' }).end(r.body),
        (err: unknown) => {
          log.error({ err: coerceError(err) }, 'webhook handler failed');
          res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'internal error' }));
        },
      );
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
