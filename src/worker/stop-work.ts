import type Anthropic from '@anthropic-ai/sdk';
import { statusOf } from '../api/classify.js';
import { coerceError } from '../errors.js';
import { combineSignals } from '../internal/abort.js';
import { WORK_CALL_CUT_OFFS } from '../internal/defaults.js';
import { errorSummary, type Logger } from '../internal/logger.js';

/** Bound on one stop request (close() must stay bounded). */
export const STOP_WORK_CUT_OFF_MS = WORK_CALL_CUT_OFFS.stopMs;

/**
 * Force-stop a work item with `client`'s credential, bounded by {@link STOP_WORK_CUT_OFF_MS}; 409
 * means it already is stopped. Never throws: the failure is returned for the caller to log (the
 * server reclaims the item when its lease expires).
 */
export async function forceStopWork(
  client: Anthropic,
  work: { workId: string; environmentId: string },
  requestOptions: object = {},
): Promise<{ stopped: true } | { stopped: false; error: unknown }> {
  const cut = combineSignals([], STOP_WORK_CUT_OFF_MS);
  try {
    await client.beta.environments.work.stop(
      work.workId,
      { environment_id: work.environmentId, force: true },
      { ...requestOptions, signal: cut.signal },
    );
    return { stopped: true };
  } catch (e) {
    if (statusOf(e) === 409) return { stopped: true };
    return { stopped: false, error: e };
  } finally {
    cut.dispose();
  }
}

/**
 * Force-stop a work item that nobody will serve (an item that is not a session, claimed by the
 * launcher or the webhook handler): acknowledged and left alone, it would come back to the queue
 * each time its lease lapses. Never throws; a failure is logged. True when the item is stopped.
 */
export async function stopUnservedWork(client: Anthropic, work: { workId: string; environmentId: string }, log: Logger): Promise<boolean> {
  const result = await forceStopWork(client, work);
  if (!result.stopped) {
    log.warn(
      { err: coerceError(result.error), status: statusOf(result.error) },
      'could not stop a work item nobody serves; the server hands it out again once its lease expires',
    );
  }
  return result.stopped;
}

/** Force-stop a served item at its end; a failure is logged as an error (the lease still lapses). */
export async function stopServedWork(
  client: Anthropic,
  work: { workId: string; environmentId: string },
  requestOptions: object,
  log: Logger,
): Promise<boolean> {
  const result = await forceStopWork(client, work, requestOptions);
  if (!result.stopped)
    log.error({ error: errorSummary(result.error) }, 'force-stop failed; the server will reclaim the item when its lease expires');
  return result.stopped;
}
