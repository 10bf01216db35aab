import type Anthropic from '@anthropic-ai/sdk';
import type { BetaSelfHostedWork } from '@anthropic-ai/sdk/resources/beta/environments/work';
import { combineSignals } from '../internal/abort.js';
import { API_LIMITS, WORK_CALL_CUT_OFFS } from '../internal/defaults.js';

/** One work item claimed from the queue (polled and acknowledged), with what `handleItem` needs. */
export interface ClaimedItem {
  workId: string;
  environmentId: string;
  /** `data.id` of a `session` item; undefined for other item types (health checks). */
  sessionId: string | undefined;
  dataType: string | undefined;
  /** The item's secret as the poll returned it; forward it untouched, never log it. */
  secret: string | undefined;
}

/** Bound on one poll: with `block_ms` at most 999 an answer takes about a second; past this the poll is cut off. */
export const CLAIM_POLL_CUT_OFF_MS = WORK_CALL_CUT_OFFS.pollMs;
/** Bound on one ack. */
export const CLAIM_ACK_CUT_OFF_MS = WORK_CALL_CUT_OFFS.ackMs;

/**
 * Poll the environment's queue once (waiting at most `blockMs`, capped by the API at 999) and
 * acknowledge what comes back. `undefined` means the queue was empty. The client must authenticate
 * with the environment key. Each request is bounded (a hung poll or ack rejects instead of waiting
 * for the SDK's own 10-minute timeout). `signal` cuts the poll short but never an ack in flight: an
 * ack that reached the server makes the item ours, so the caller gets it and must run it to its stop.
 */
export async function claimOne(
  envClient: Anthropic,
  environmentId: string,
  opts: { workerId: string; blockMs?: number; signal?: AbortSignal; pollCutOffMs?: number; ackCutOffMs?: number },
): Promise<ClaimedItem | undefined> {
  const pollCutOffMs = opts.pollCutOffMs ?? CLAIM_POLL_CUT_OFF_MS;
  const pollCut = combineSignals([opts.signal], pollCutOffMs);
  let item: BetaSelfHostedWork | null;
  try {
    item = await envClient.beta.environments.work.poll(
      environmentId,
      { block_ms: Math.min(opts.blockMs ?? API_LIMITS.pollBlockMaxMs, API_LIMITS.pollBlockMaxMs), 'Anthropic-Worker-ID': opts.workerId },
      { signal: pollCut.signal },
    );
  } catch (e) {
    throw cutOffError(
      e,
      pollCut.signal,
      opts.signal,
      `polling environment ${environmentId} for work got no answer within ${pollCutOffMs} ms`,
    );
  } finally {
    pollCut.dispose();
  }
  if (!item) return undefined;
  const ackCutOffMs = opts.ackCutOffMs ?? CLAIM_ACK_CUT_OFF_MS;
  const ackCut = combineSignals([], ackCutOffMs);
  try {
    await envClient.beta.environments.work.ack(item.id, { environment_id: item.environment_id }, { signal: ackCut.signal });
  } catch (e) {
    throw cutOffError(
      e,
      ackCut.signal,
      undefined,
      `acknowledging work item ${item.id} of environment ${environmentId} got no answer within ${ackCutOffMs} ms`,
    );
  } finally {
    ackCut.dispose();
  }
  return {
    workId: item.id,
    environmentId: item.environment_id,
    sessionId: item.data.type === 'session' ? item.data.id : undefined,
    dataType: item.data.type ?? undefined,
    secret: item.secret ?? undefined,
  };
}

/** A request cut off at its bound (not by the caller) becomes an error that says so; anything else passes through. */
function cutOffError(e: unknown, cut: AbortSignal, caller: AbortSignal | undefined, message: string): unknown {
  if (!cut.aborted || caller?.aborted) return e;
  const err = new Error(message, { cause: e });
  err.name = 'TimeoutError';
  return err;
}
