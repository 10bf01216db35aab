import { z } from 'zod/v3';
import type Anthropic from '@anthropic-ai/sdk';
import { WEBHOOK_DEFAULTS } from '../internal/defaults.js';
import type { Logger } from '../internal/logger.js';
import { isObject, looksLikeClient, looksLikeLogger, parseOptions } from '../internal/option-schema.js';
import type { ItemOutcome } from '../worker/events.js';

/** Most items one webhook handler runs at once. */
export const WEBHOOK_CONCURRENCY_MAX = WEBHOOK_DEFAULTS.concurrencyMax;
/** Default largest accepted request body: 1 MiB. */
export const MAX_BODY_BYTES_DEFAULT = WEBHOOK_DEFAULTS.maxBodyBytes;
/** Largest `maxBodyBytes` accepted: 64 MiB (a webhook event is a few hundred bytes). */
export const MAX_BODY_BYTES_LIMIT = WEBHOOK_DEFAULTS.maxBodyBytesLimit;
/** Default number of webhook ids remembered to drop redeliveries. */
export const DEDUPE_WINDOW_DEFAULT = WEBHOOK_DEFAULTS.dedupeWindow;
/** The event type that triggers a drain by default. */
export const DEFAULT_EVENT_TYPES: readonly string[] = ['session.status_run_started'];

/**
 * The part of `EnvironmentWorker` the webhook handler drives. `handleItem` resolves with the outcome,
 * or rejects (WorkItemFailedError) when the item failed; the handler logs either and never lets the
 * rejection go unhandled.
 */
export interface WebhookWorker {
  /**
   * Serve one claimed item: its ids, the environment key for an item without a secret, the item's `secret`, and
   * a signal that ends the item as `close()` does. Resolves with the outcome, or rejects when the item failed.
   */
  handleItem(opts: {
    workId: string;
    environmentId: string;
    sessionId: string;
    environmentKey?: string;
    workSecret?: string;
    signal?: AbortSignal;
  }): Promise<ItemOutcome>;
  /** True once the worker is closing; the handler then answers every delivery 503. */
  readonly closing?: boolean;
  /**
   * Resolves once the worker may serve sessions from a queue (an `EnvironmentWorker`'s: its
   * sandbox working, or `'none'` chosen); rejects with why not. Called before the first claim.
   */
  readyToServe?(): Promise<void>;
}

/**
 * Options of {@link createWebhookHandler}. They are validated up front: every problem in one {@link
 * ConfigError}, unknown keys refused.
 */
export interface WebhookHandlerOptions {
  /** Runs each claimed item (`handleItem`). Build it with the same options as a poll daemon. */
  worker: WebhookWorker;
  /** An SDK client: verifies deliveries (`beta.webhooks.unwrap`) and, re-keyed, polls the queue. */
  client: Anthropic;
  /**
   * The endpoint's signing secret (`whsec_…`). Required: `undefined` (an unset
   * `process.env.ANTHROPIC_WEBHOOK_SIGNING_KEY`) is accepted by the type and refused at once, with
   * every other missing input, in one ConfigError.
   */
  webhookSecret: string | undefined;
  /** The self-hosted environment whose queue a delivery drains. Required (`undefined` is refused as above). */
  environmentId: string | undefined;
  /** The environment key: polls and acks use it; forwarded to `handleItem` for items without a secret. Required (`undefined` is refused as above). */
  environmentKey: string | undefined;
  /** Webhook event types (`data.type`) that trigger a drain. Default: `session.status_run_started`. Others get 200 and are ignored. */
  eventTypes?: readonly string[];
  /** Items run at once by this handler. Default 1, at most 64. */
  concurrency?: number;
  /**
   * Largest accepted body, in bytes. Default 1 MiB, at most 64 MiB. A request that declares or
   * sends more is answered 413 and its connection closed as soon as the limit is passed.
   */
  maxBodyBytes?: number;
  /** How many webhook ids are remembered to drop redeliveries. Default 10 000. */
  dedupeWindow?: number;
  /** Sent as `Anthropic-Worker-ID` on polls. Default `<hostname>-webhook-<uuid>`. */
  workerId?: string;
  /** A pino logger. Default: warnings and errors to stderr. */
  logger?: Logger;
}

export interface ResolvedWebhookHandlerOptions {
  worker: WebhookWorker;
  client: Anthropic;
  webhookSecret: string;
  environmentId: string;
  environmentKey: string;
  eventTypes: ReadonlySet<string>;
  concurrency: number;
  maxBodyBytes: number;
  dedupeWindow: number;
  workerId: string | undefined;
  logger: Logger | undefined;
}

const nonEmpty = z.string().min(1);

const schema = z
  .object({
    worker: z.custom<WebhookWorker>((v) => isObject(v) && typeof v['handleItem'] === 'function'),
    client: z.custom<Anthropic>(looksLikeClient),
    webhookSecret: nonEmpty,
    environmentId: nonEmpty,
    environmentKey: nonEmpty,
    eventTypes: z.array(nonEmpty).min(1).optional(),
    concurrency: z.number().int().min(1).max(WEBHOOK_CONCURRENCY_MAX).optional(),
    maxBodyBytes: z.number().int().min(1).max(MAX_BODY_BYTES_LIMIT).optional(),
    dedupeWindow: z.number().int().min(1).optional(),
    workerId: nonEmpty.optional(),
    logger: z.custom<Logger>(looksLikeLogger).optional(),
  })
  .strict();

const EXPECTED: Record<string, string> = {
  worker: 'an EnvironmentWorker (an object with handleItem)',
  client: 'an Anthropic client (new Anthropic({ ... }))',
  webhookSecret: 'a non-empty string (whsec_...)',
  environmentId: 'a non-empty string (env_...)',
  environmentKey: 'a non-empty string',
  eventTypes: 'a non-empty array of event types (session.status_run_started, ...)',
  concurrency: `an integer from 1 to ${WEBHOOK_CONCURRENCY_MAX}`,
  maxBodyBytes: `an integer number of bytes from 1 to ${MAX_BODY_BYTES_LIMIT}`,
  dedupeWindow: 'an integer >= 1',
  workerId: 'a non-empty string',
  logger: 'a pino logger',
};

/** Validate `createWebhookHandler`'s options and fill in defaults; every problem in one {@link ConfigError}. */
export function resolveWebhookHandlerOptions(input: unknown): ResolvedWebhookHandlerOptions {
  const o = parseOptions(schema, input, {
    owner: 'createWebhookHandler',
    expected: EXPECTED,
    secretKeys: new Set(['environmentKey', 'webhookSecret']),
    variables: {
      webhookSecret: 'ANTHROPIC_WEBHOOK_SIGNING_KEY',
      environmentId: 'ANTHROPIC_ENVIRONMENT_ID',
      environmentKey: 'ANTHROPIC_ENVIRONMENT_KEY',
    },
  });
  return {
    worker: o.worker,
    client: o.client,
    webhookSecret: o.webhookSecret,
    environmentId: o.environmentId,
    environmentKey: o.environmentKey,
    eventTypes: new Set(o.eventTypes ?? DEFAULT_EVENT_TYPES),
    concurrency: o.concurrency ?? WEBHOOK_DEFAULTS.concurrency,
    maxBodyBytes: o.maxBodyBytes ?? MAX_BODY_BYTES_DEFAULT,
    dedupeWindow: o.dedupeWindow ?? DEDUPE_WINDOW_DEFAULT,
    workerId: o.workerId,
    logger: o.logger,
  };
}
