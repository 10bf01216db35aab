// Pins why a work item's signal fired: the caller's signal (the worker closing) ends it as `closed`,
// its lease ending for any reason but `done` ends it as `lease` with a LeaseLostError, and the first
// cause recorded wins. Plain objects stand in for the lease: only its signal and reason are read.
import { describe, expect, it } from 'vitest';
import { ItemControl } from '../../src/worker/item-control.js';
import type { LeaseEndReason } from '../../src/worker/lease.js';

function fakeLease() {
  const ctrl = new AbortController();
  const lease = {
    reason: undefined as LeaseEndReason | undefined,
    signal: ctrl.signal,
    end(reason: LeaseEndReason) {
      lease.reason = reason;
      ctrl.abort(new Error(`lease ended: ${reason}`));
    },
  };
  return lease;
}

describe('ItemControl', () => {
  it('ends the item as closed when the caller aborts', () => {
    const outer = new AbortController();
    const control = new ItemControl(outer.signal);
    control.watch(fakeLease(), 'work_1');
    expect(control.signal.aborted).toBe(false);
    outer.abort(new Error('worker closing'));
    expect(control.endCause).toBe('closed');
    expect(control.signal.reason).toMatchObject({ message: 'worker closing' });
  });

  it('starts aborted, as closed, when the caller already gave up', () => {
    const outer = new AbortController();
    outer.abort(new Error('gone'));
    const control = new ItemControl(outer.signal);
    expect(control.signal.aborted).toBe(true);
    expect(control.endCause).toBe('closed');
  });

  it.each(['server_stop', 'lease_lost', 'rejected', 'assumed_lost'] as const)(
    'ends the item as lease with a LeaseLostError when the lease ends as %s',
    (reason) => {
      const control = new ItemControl(new AbortController().signal);
      const lease = fakeLease();
      control.watch(lease, 'work_1');
      lease.end(reason);
      expect(control.endCause).toBe('lease');
      expect(control.signal.reason).toMatchObject({
        code: 'MAW_LEASE_LOST',
        workId: 'work_1',
        message: `work item work_1: lease ended (${reason})`,
      });
    },
  );

  it('ignores a lease that ends as done (the item let it go)', () => {
    const control = new ItemControl(new AbortController().signal);
    const lease = fakeLease();
    control.watch(lease, 'work_1');
    lease.end('done');
    expect(control.endCause).toBeUndefined();
    expect(control.signal.aborted).toBe(false);
  });

  it('keeps the first cause: a lease lost after the close stays closed', () => {
    const outer = new AbortController();
    const control = new ItemControl(outer.signal);
    const lease = fakeLease();
    control.watch(lease, 'work_1');
    outer.abort(new Error('worker closing'));
    lease.end('lease_lost');
    expect(control.endCause).toBe('closed');
  });

  it('keeps the first cause: a close after the lease ended stays lease', () => {
    const outer = new AbortController();
    const control = new ItemControl(outer.signal);
    const lease = fakeLease();
    control.watch(lease, 'work_1');
    lease.end('server_stop');
    outer.abort(new Error('worker closing'));
    expect(control.endCause).toBe('lease');
  });

  it('stops listening to the caller once disposed', () => {
    const outer = new AbortController();
    const control = new ItemControl(outer.signal);
    control.dispose();
    outer.abort(new Error('late'));
    expect(control.endCause).toBeUndefined();
    expect(control.signal.aborted).toBe(false);
  });
});
