// Pins how a work item's end status is decided from what its phases did (ran, skipped, never
// started), what they threw, what cut them short (the lease or the worker closing) and why the
// lease ended: an abort caused by the lease or by close() is not a failure of the item, a rejected
// heartbeat is, and only a clean end gives the memory its final sync.
import { describe, expect, it } from 'vitest';
import { decideItemEnd, type EndCause, type ItemEndInput, type MemoryEnd, type PhasesResult } from '../../src/worker/item-end.js';
import type { ItemStatus } from '../../src/worker/events.js';
import type { LeaseEndReason } from '../../src/worker/lease.js';

const thrown = new Error('the session threw');
/** A heartbeat refused with 403, shaped as the SDK's API errors are. */
const rejection = Object.assign(new Error('403 permission_error: not yours'), {
  name: 'PermissionDeniedError',
  status: 403,
  headers: {},
  error: { type: 'error', error: { type: 'permission_error', message: 'not yours' } },
  requestID: 'req_1',
});

interface Row {
  description: string;
  phases: PhasesResult;
  threw: boolean;
  endCause: EndCause | undefined;
  leaseReason: LeaseEndReason | undefined;
  status: ItemStatus;
  /** Which error the item reports: none, what the phases threw, or the heartbeat's rejection. */
  reports: 'none' | 'thrown' | 'heartbeat';
  memoryEnd: MemoryEnd;
}

const rows: Row[] = [
  // Nothing cut the item short.
  {
    description: 'a session that ran to its end completes with the final sync',
    phases: 'ran',
    threw: false,
    endCause: undefined,
    leaseReason: undefined,
    status: 'completed',
    reports: 'none',
    memoryEnd: 'final_sync',
  },
  {
    description: 'a session whose phases threw fails with that error and gets only the flush',
    phases: 'ran',
    threw: true,
    endCause: undefined,
    leaseReason: undefined,
    status: 'failed',
    reports: 'thrown',
    memoryEnd: 'flush_only',
  },
  {
    description: 'an item that is not a session, or whose session terminated, is skipped',
    phases: 'skipped',
    threw: false,
    endCause: undefined,
    leaseReason: undefined,
    status: 'skipped',
    reports: 'none',
    memoryEnd: 'final_sync',
  },
  // The worker closed (or the caller gave up).
  {
    description: 'a session the worker closed is aborted with the final sync',
    phases: 'ran',
    threw: false,
    endCause: 'closed',
    leaseReason: undefined,
    status: 'aborted',
    reports: 'none',
    memoryEnd: 'final_sync',
  },
  {
    description: 'what the close made the session throw is dropped',
    phases: 'ran',
    threw: true,
    endCause: 'closed',
    leaseReason: undefined,
    status: 'aborted',
    reports: 'none',
    memoryEnd: 'final_sync',
  },
  {
    description: 'an item aborted before it started is aborted',
    phases: 'aborted',
    threw: false,
    endCause: 'closed',
    leaseReason: undefined,
    status: 'aborted',
    reports: 'none',
    memoryEnd: 'final_sync',
  },
  {
    description: 'a skipped item stays skipped when the worker closes',
    phases: 'skipped',
    threw: false,
    endCause: 'closed',
    leaseReason: undefined,
    status: 'skipped',
    reports: 'none',
    memoryEnd: 'final_sync',
  },
  {
    description: 'a lease lost after the close does not change the close: aborted, final sync',
    phases: 'ran',
    threw: true,
    endCause: 'closed',
    leaseReason: 'lease_lost',
    status: 'aborted',
    reports: 'none',
    memoryEnd: 'final_sync',
  },
  {
    description: 'a server stop after the close does not change the close',
    phases: 'ran',
    threw: false,
    endCause: 'closed',
    leaseReason: 'server_stop',
    status: 'aborted',
    reports: 'none',
    memoryEnd: 'final_sync',
  },
  {
    description: 'a heartbeat rejected after the close does not fail the item',
    phases: 'ran',
    threw: true,
    endCause: 'closed',
    leaseReason: 'rejected',
    status: 'aborted',
    reports: 'none',
    memoryEnd: 'final_sync',
  },
  // The lease ended.
  {
    description: 'a server stop ends the item stopped_by_server with the final sync, the abort error dropped',
    phases: 'ran',
    threw: true,
    endCause: 'lease',
    leaseReason: 'server_stop',
    status: 'stopped_by_server',
    reports: 'none',
    memoryEnd: 'final_sync',
  },
  {
    description: 'a server stop with nothing thrown is stopped_by_server too',
    phases: 'ran',
    threw: false,
    endCause: 'lease',
    leaseReason: 'server_stop',
    status: 'stopped_by_server',
    reports: 'none',
    memoryEnd: 'final_sync',
  },
  {
    description: 'a lease taken by someone else (412) is lease_lost with only the flush',
    phases: 'ran',
    threw: true,
    endCause: 'lease',
    leaseReason: 'lease_lost',
    status: 'lease_lost',
    reports: 'none',
    memoryEnd: 'flush_only',
  },
  {
    description: 'a lease without a successful beat for a whole TTL is lease_lost with only the flush',
    phases: 'ran',
    threw: true,
    endCause: 'lease',
    leaseReason: 'assumed_lost',
    status: 'lease_lost',
    reports: 'none',
    memoryEnd: 'flush_only',
  },
  {
    description: 'a rejected heartbeat fails the item with the heartbeat error',
    phases: 'ran',
    threw: false,
    endCause: 'lease',
    leaseReason: 'rejected',
    status: 'failed',
    reports: 'heartbeat',
    memoryEnd: 'flush_only',
  },
  {
    description: 'a rejected heartbeat wins over what its abort made the session throw',
    phases: 'ran',
    threw: true,
    endCause: 'lease',
    leaseReason: 'rejected',
    status: 'failed',
    reports: 'heartbeat',
    memoryEnd: 'flush_only',
  },
  {
    description: 'a lease lost while the item was being skipped is lease_lost',
    phases: 'skipped',
    threw: false,
    endCause: 'lease',
    leaseReason: 'lease_lost',
    status: 'lease_lost',
    reports: 'none',
    memoryEnd: 'flush_only',
  },
  {
    description: 'a server stop before the item started is stopped_by_server',
    phases: 'aborted',
    threw: false,
    endCause: 'lease',
    leaseReason: 'server_stop',
    status: 'stopped_by_server',
    reports: 'none',
    memoryEnd: 'final_sync',
  },
];

describe('decideItemEnd', () => {
  it.each(rows)('$description', (row) => {
    const input: ItemEndInput = {
      workId: 'work_1',
      phases: row.phases,
      error: row.threw ? thrown : undefined,
      endCause: row.endCause,
      leaseReason: row.leaseReason,
      leaseRejection: row.leaseReason === 'rejected' ? rejection : undefined,
    };
    const end = decideItemEnd(input);
    expect(end.status).toBe(row.status);
    expect(end.memoryEnd).toBe(row.memoryEnd);
    switch (row.reports) {
      case 'none':
        expect(end.error).toBeUndefined();
        break;
      case 'thrown':
        expect(end.error).toBe(thrown);
        break;
      case 'heartbeat':
        expect(end.error).toMatchObject({ code: 'MAW_REMOTE_API', status: 403, requestId: 'req_1' });
        expect(end.error?.message).toContain('heartbeat of work item work_1 failed with HTTP 403');
        expect((end.error as { cause?: unknown }).cause).toBe(rejection);
        break;
    }
  });

  it('reports an error exactly when the item failed', () => {
    for (const row of rows) {
      const end = decideItemEnd({
        workId: 'w',
        phases: row.phases,
        error: row.threw ? thrown : undefined,
        endCause: row.endCause,
        leaseReason: row.leaseReason,
        leaseRejection: rejection,
      });
      expect(end.error !== undefined, row.description).toBe(end.status === 'failed');
    }
  });
});
