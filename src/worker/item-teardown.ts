import type { Acquired } from './item-acquire.js';
import type { MemoryEnd } from './item-end.js';
import type { ItemHoldings } from './item-prepare.js';
import type { ItemReporter } from './item-reporter.js';
import type { FinishReport } from './memory-port.js';
import type { ClaimedWork } from './poller.js';
import { stopServedWork } from './stop-work.js';

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
  } else if (
    await stopServedWork(acquired.postClient, { workId: work.id, environmentId: work.environmentId }, acquired.requestOptions, reporter.log)
  ) {
    reporter.emit('workStopped', { workId: work.id });
  }
  return flush;
}
