import type Anthropic from '@anthropic-ai/sdk';
import { coerceError, MissingInputError } from '../errors.js';
import type { TimerClock } from '../internal/clock.js';
import { errorSummary, type Logger } from '../internal/logger.js';
import { decodeWorkSecret } from './credentials.js';
import { ItemControl } from './item-control.js';
import { Lease, type HeartbeatApi } from './lease.js';
import type { ResolvedWorkerOptions } from './options.js';
import type { ClaimedWork } from './poller.js';
import { postingClient, scopedClient } from './scoped-client.js';
import { SendRetryWindow } from './send-retry-window.js';

/** Request options every per-item call carries (the caller's, from the worker options). */
export type ItemRequestOptions = NonNullable<ResolvedWorkerOptions['requestOptions']> | Record<string, never>;

/** What the acquire phase hands the rest of the item. */
export interface Acquired {
  /** A client authenticated with the item credential only. */
  client: Anthropic;
  /** `client`, with its posts (tool results, heartbeats, the stop) over the buffered transport when it may. */
  postClient: Anthropic;
  /** The sessions token of the work secret; null when the item runs on the environment key. */
  sessionsToken: string | null;
  requestOptions: ItemRequestOptions;
  /** The item's abort signal and why it fired. */
  control: ItemControl;
  /** Heartbeating already. */
  lease: Lease;
  retryWindow: SendRetryWindow;
}

/**
 * Acquire phase: the item credential (the sessions token of the work secret, else the environment
 * key), a client scoped to it, then the lease, heartbeating from now on so a slow download never
 * lets it lapse. Returns the error instead when there is no usable credential: such an item cannot
 * be heartbeated or stopped, and is left to the server to reclaim.
 */
export function acquire(
  work: ClaimedWork,
  ctx: { options: ResolvedWorkerOptions; environmentKey: string | undefined; signal: AbortSignal; log: Logger; clock: TimerClock },
): Acquired | { error: Error } {
  const { log } = ctx;
  const secret = decodeWorkSecret(work.secret);
  if (secret.status === 'malformed') {
    log.warn('work item secret carries no usable sessions token; falling back to the environment key');
  }
  const credential = secret.sessionsToken ?? ctx.environmentKey;
  if (credential === undefined) {
    const error = new MissingInputError(
      'environmentKey',
      'ANTHROPIC_ENVIRONMENT_KEY',
      `work item ${work.id} (its secret yields no sessions token)`,
    );
    log.error({ error: errorSummary(error) }, 'no credential for this work item; it cannot be heartbeated or stopped');
    return { error };
  }
  let client: Anthropic;
  try {
    client = scopedClient(ctx.options.client, credential);
  } catch (e) {
    const error = coerceError(e);
    log.error({ err: error }, 'could not build the client for this work item; it is left to the server to reclaim');
    return { error };
  }
  const postClient = postingClient(client);
  const requestOptions: ItemRequestOptions = ctx.options.requestOptions ?? {};
  const control = new ItemControl(ctx.signal);
  const retryWindow = new SendRetryWindow();
  const lease = new Lease({
    api: heartbeatApi(postClient, requestOptions),
    workId: work.id,
    environmentId: work.environmentId,
    logger: log,
    clock: ctx.clock,
    onTtl: (ttlMs) => retryWindow.set(ttlMs),
  });
  control.watch(lease, work.id);
  lease.start();
  return { client, postClient, sessionsToken: secret.sessionsToken, requestOptions, control, lease, retryWindow };
}

/** The heartbeat call over a scoped client, with the caller's request options merged in. */
function heartbeatApi(client: Anthropic, requestOptions: object): HeartbeatApi {
  return {
    heartbeat: (workId, params, options) =>
      client.beta.environments.work.heartbeat(workId, params, { ...requestOptions, signal: options.signal }),
  };
}
