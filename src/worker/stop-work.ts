import type Anthropic from '@anthropic-ai/sdk';
import { statusOf } from '../api/classify.js';
import { coerceError } from '../errors.js';
import { combineSignals } from '../internal/abort.js';
import { WORK_CALL_CUT_OFFS } from '../internal/defaults.js';
import type { Logger } from '../internal/logger.js';

/** Bound on one stop request. */
export const STOP_WORK_CUT_OFF_MS = WORK_CALL_CUT_OFFS.stopMs;

/**
 * Force-stop a work item that nobody will serve (an item that is not a session, claimed by the
 * launcher or the webhook handler): acknowledged and left alone, it would come back to the queue
 * each time its lease lapses. 409 means it is already stopped. Never throws: a failure is logged
 * and the server reclaims the item when its lease expires. True when the item is stopped.
 */
export async function stopUnservedWork(client: Anthropic, work: { workId: string; environmentId: string }, log: Logger): Promise<boolean> {
  const cut = combineSignals([], STOP_WORK_CUT_OFF_MS);
  try {
    await client.beta.environments.work.stop(work.workId, { environment_id: work.environmentId, force: true }, { signal: cut.signal });
    return true;
  } catch (e) {
    if (statusOf(e) === 409) return true;
    log.warn(
      { err: coerceError(e), status: statusOf(e) },
      'could not stop a work item nobody serves; the server hands it out again once its lease expires',
    );
    return false;
  } finally {
    cut.dispose();
  }
}
