import { toRemoteApiError } from '../api/classify.js';
import type { ItemStatus } from './events.js';
import type { LeaseEndReason } from './lease.js';

/**
 * Why an item's session was cut short, the first recorded wins: its lease ended (for any reason
 * but `done`), or the worker closed / the caller gave up (`closed`).
 */
export type EndCause = 'lease' | 'closed';

/** How the phases left the item, before any abort is weighed: it ran its session, skipped it, or never started. */
export type PhasesResult = 'ran' | 'skipped' | 'aborted';

/** How the memory of the session ends: the final sync then the flush, or only the push-only flush. */
export type MemoryEnd = 'final_sync' | 'flush_only';

export interface ItemEndInput {
  workId: string;
  phases: PhasesResult;
  /** What the phases threw, if anything. */
  error: Error | undefined;
  endCause: EndCause | undefined;
  /** Why the lease ended so far (undefined while it still runs). */
  leaseReason: LeaseEndReason | undefined;
  /** The heartbeat failure that rejected the lease, when it was rejected. */
  leaseRejection: unknown;
}

export interface ItemEnd {
  status: ItemStatus;
  /** The error the item reports: set exactly when `status` is `failed`. */
  error: Error | undefined;
  memoryEnd: MemoryEnd;
}

/**
 * How a work item ended, from what its phases did and what cut them short. No I/O.
 *
 * Rules (docs/design.md, "How a work item runs and ends"): an abort caused by the lease or by the
 * worker closing is not a failure of the item.
 * - Lease ended: lost (412 or no beat for a TTL) → `lease_lost`; the server stopped the item →
 *   `stopped_by_server`; a rejected heartbeat → `failed` with the heartbeat's error, whatever the
 *   abort made the session throw.
 * - Worker closed: `aborted` (a skipped item stays `skipped`), and what the abort made the session
 *   throw is dropped.
 * - Otherwise: an error → `failed`; else `completed`, `skipped` or `aborted` as the phases left it.
 * Memory gets the final sync when the session ended cleanly (the runner or the operator ended it,
 * or the server stopped it); a lost lease or a failure gets only the push-only flush.
 */
export function decideItemEnd(input: ItemEndInput): ItemEnd {
  const { endCause, leaseReason } = input;
  let status: ItemStatus;
  let error: Error | undefined;
  if (endCause === 'lease') {
    const lost = leaseReason === 'lease_lost' || leaseReason === 'assumed_lost';
    status = lost ? 'lease_lost' : leaseReason === 'server_stop' ? 'stopped_by_server' : 'failed';
    error = status === 'failed' ? toRemoteApiError(input.leaseRejection, `heartbeat of work item ${input.workId}`) : undefined;
  } else if (endCause === 'closed') {
    status = input.phases === 'skipped' ? 'skipped' : 'aborted';
    error = undefined;
  } else if (input.error) {
    status = 'failed';
    error = input.error;
  } else {
    status = input.phases === 'ran' ? 'completed' : input.phases;
    error = undefined;
  }
  const clean = error === undefined && (endCause === undefined || endCause === 'closed' || leaseReason === 'server_stop');
  return { status, error, memoryEnd: clean ? 'final_sync' : 'flush_only' };
}
