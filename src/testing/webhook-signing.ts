/**
 * Sign webhook deliveries the way the API does (Standard Webhooks: HMAC-SHA256 over
 * `<webhook-id>.<webhook-timestamp>.<body>` with the base64 key after `whsec_`), so a handler that
 * verifies with `client.beta.webhooks.unwrap` can be tested offline; and make an emulator post a
 * signed `session.status_run_started` to a URL whenever a session is created.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { ConfigError } from '../errors.js';

const SECRET_PREFIX = 'whsec_';

/** A fresh signing secret in the `whsec_<base64>` form the Console hands out. */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(24).toString('base64');
}

/** A signed delivery, as {@link signWebhook} makes it: post `body` with `headers`. */
export interface SignedWebhook {
  /** The exact body to send: verification is over these bytes. */
  body: string;
  /** `webhook-id`, `webhook-timestamp`, `webhook-signature` and `content-type`. */
  headers: Record<string, string>;
}

/** Options of {@link signWebhook}. */
export interface SignOptions {
  /** The `webhook-id` header. Default: the payload's `id` when it has one, else a new `msg_…` id. */
  id?: string;
  /** Unix seconds for `webhook-timestamp`. Default: now. Deliveries older than 5 minutes are refused by `unwrap`. */
  timestampSeconds?: number;
}

/** Sign `payload` (an object, sent as JSON, or a string sent as is) with `secret` (`whsec_…`). */
export function signWebhook(payload: unknown, secret: string, options: SignOptions = {}): SignedWebhook {
  const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
  const payloadId = typeof payload === 'object' && payload !== null ? (payload as { id?: unknown }).id : undefined;
  const id = options.id ?? (typeof payloadId === 'string' ? payloadId : `msg_${randomUUID().replaceAll('-', '')}`);
  const timestamp = String(options.timestampSeconds ?? Math.floor(Date.now() / 1000));
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  if (key.length === 0)
    throw new ConfigError('signWebhook: the secret decodes to an empty key; pass a whsec_<base64> secret (generateWebhookSecret())');
  const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': timestamp,
      'webhook-signature': `v1,${signature}`,
    },
  };
}

/** The JSON a webhook delivers for a session event (`BetaWebhookEvent` in the SDK). */
export interface WebhookEventPayload {
  /** The event's id (`wevt_…`); the default `webhook-id` of its delivery. */
  id: string;
  /** Always `event`. */
  type: 'event';
  /** ISO time the event was made. */
  created_at: string;
  /** What the event is about. */
  data: {
    /** The session's id. */
    id: string;
    /** The event type, e.g. `session.status_run_started`. */
    type: string;
    /** The organization's id (`org_emulator` here). */
    organization_id: string;
    /** The workspace's id (`wrkspc_emulator` here). */
    workspace_id: string;
  };
}

/** A webhook event about `sessionId`, e.g. `session.status_run_started`. */
export function sessionWebhookEvent(sessionId: string, type = 'session.status_run_started'): WebhookEventPayload {
  return {
    id: `wevt_${randomUUID().replaceAll('-', '')}`,
    type: 'event',
    created_at: new Date().toISOString(),
    data: { id: sessionId, type, organization_id: 'org_emulator', workspace_id: 'wrkspc_emulator' },
  };
}

/** Anything that announces new sessions, like the emulator's `on('sessionCreated', …)`. */
export interface SessionCreatedSource {
  /** Add a listener called with each new session's id. */
  on(event: 'sessionCreated', listener: (e: { sessionId: string }) => void): unknown;
  /** Remove a listener added with `on`. */
  off(event: 'sessionCreated', listener: (e: { sessionId: string }) => void): unknown;
}

/** One delivery {@link postWebhooksTo} posted, and how it was answered. */
export interface WebhookDelivery {
  /** The new session the delivery announced. */
  sessionId: string;
  /** Its `webhook-id` header. */
  webhookId: string;
  /** HTTP status of the answer, or undefined when the post failed. */
  status: number | undefined;
  /** How long the endpoint took to answer, ms. */
  ms: number;
  /** Why the post failed, when it did (no answer). */
  error?: Error;
}

/** What {@link postWebhooksTo} returns: its deliveries so far, and a way to wait for them and to stop. */
export interface WebhookPoster {
  /** Every delivery posted so far, oldest first; each is filled in when its answer arrives. */
  readonly deliveries: readonly WebhookDelivery[];
  /** Resolves once every delivery posted so far has been answered. */
  settled(): Promise<void>;
  /** Stop posting on new sessions. */
  stop(): void;
}

/**
 * Post a signed `session.status_run_started` (or `eventType`) to `url` each time `emu` creates a
 * session, the way the API notifies a webhook endpoint.
 */
export function postWebhooksTo(
  emu: SessionCreatedSource,
  url: string,
  secret: string,
  options: { eventType?: string } = {},
): WebhookPoster {
  const deliveries: WebhookDelivery[] = [];
  const pending = new Set<Promise<void>>();
  const onCreated = ({ sessionId }: { sessionId: string }): void => {
    const signed = signWebhook(sessionWebhookEvent(sessionId, options.eventType), secret);
    const started = performance.now();
    const delivery: WebhookDelivery = { sessionId, webhookId: signed.headers['webhook-id']!, status: undefined, ms: 0 };
    deliveries.push(delivery);
    const p = fetch(url, { method: 'POST', headers: signed.headers, body: signed.body })
      .then(async (res) => {
        delivery.status = res.status;
        await res.arrayBuffer();
      })
      .catch((e: unknown) => {
        delivery.error = e instanceof Error ? e : new Error(String(e));
      })
      .finally(() => {
        delivery.ms = performance.now() - started;
        pending.delete(p);
      });
    pending.add(p);
  };
  emu.on('sessionCreated', onCreated);
  return {
    deliveries,
    settled: async () => {
      while (pending.size > 0) await Promise.allSettled([...pending]);
    },
    stop: () => void emu.off('sessionCreated', onCreated),
  };
}
