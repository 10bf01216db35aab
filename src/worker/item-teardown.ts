import type Anthropic from '@anthropic-ai/sdk';
import { statusOf } from '../api/classify.js';
import { combineSignals } from '../internal/abort.js';
import { WORK_CALL_CUT_OFFS } from '../internal/defaults.js';
import { errorSummary, type Logger } from '../internal/logger.js';
import type { Acquired } from './item-acquire.js';
import type { MemoryEnd } from './item-end.js';
import type { ItemHoldings } from './item-prepare.js';
import type { ItemReporter } from './item-reporter.js';
import type { FinishReport } from './memory-port.js';
import type { ClaimedWork } from './poller.js';

/** Bound on the final force-stop request (close() must stay bounded). */
const STOP_CUT_OFF_MS = WORK_CALL_CUT_OFFS.stopMs;

/**
 * Tear-down phase, run whatever happened before it; never throws. In order: count the run out of
 * its tool folder (the last run of the session out cleans its skills and folder); end the memory
 * (`memoryEnd`), which releases the mount paths; stop listening to the caller; stop heartbeating;
 * then force-stop the item, unless the lease was lost: someone else may hold it now. Returns the
 * memory's finish report, if it made one.
 */
export async function tearDown(
  work: ClaimedWork,
  t: { held: ItemHoldings; memoryEnd: MemoryEnd; acquired: Acquired; reporter: ItemReporter },
): Promise<FinishReport | undefined> {
  const { held, acquired, reporter } = t;
  const { lease } = acquired;
  await held.folder?.leave(held.cleanupSkills, reporter.log);
  const flush = await held.memory?.finish(t.memoryEnd === 'final_sync');
  acquired.control.dispose();
  await lease.release();
  if (lease.lost) {
    reporter.leaseLost(lease.reason as 'lease_lost' | 'assumed_lost');
  } else if (await forceStop(acquired.postClient, work, acquired.requestOptions, reporter.log)) {
    reporter.emit('workStopped', { workId: work.id });
  }
  return flush;
}

/** Force-stop the item with the item credential; 409 means it already is. True when stopped. */
async function forceStop(client: Anthropic, work: ClaimedWork, requestOptions: object, log: Logger): Promise<boolean> {
  const cut = combineSignals([], STOP_CUT_OFF_MS);
  try {
    await client.beta.environments.work.stop(
      work.id,
      { environment_id: work.environmentId, force: true },
      { ...requestOptions, signal: cut.signal },
    );
    return true;
  } catch (e) {
    if (statusOf(e) === 409) return true;
    log.error({ error: errorSummary(e) }, 'force-stop failed; the server will reclaim the item when its lease expires');
    return false;
  } finally {
    cut.dispose();
  }
}
