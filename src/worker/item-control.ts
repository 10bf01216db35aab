import { LeaseLostError } from '../errors.js';
import { linkAbort } from '../internal/abort.js';
import type { EndCause } from './item-end.js';
import type { Lease } from './lease.js';

/**
 * The abort signal of one work item and why it fired. The caller's signal (the worker closing, or
 * the caller giving up) aborts it as `closed`; its lease ending for any reason but `done` aborts it
 * as `lease`, with a {@link LeaseLostError}. The first cause recorded wins.
 */
export class ItemControl {
  readonly #ctrl = new AbortController();
  #endCause: EndCause | undefined;
  readonly #detach: () => void;

  constructor(outer: AbortSignal) {
    const onOuterAbort = (): void => {
      this.#endCause ??= 'closed';
    };
    outer.addEventListener('abort', onOuterAbort, { once: true });
    if (outer.aborted) onOuterAbort();
    const unlink = linkAbort(outer, this.#ctrl);
    this.#detach = () => {
      outer.removeEventListener('abort', onOuterAbort);
      unlink();
    };
  }

  get signal(): AbortSignal {
    return this.#ctrl.signal;
  }

  get endCause(): EndCause | undefined {
    return this.#endCause;
  }

  /** End the item when `lease` ends for any reason but `done`. */
  watch(lease: Pick<Lease, 'signal' | 'reason'>, workId: string): void {
    lease.signal.addEventListener(
      'abort',
      () => {
        if (lease.reason === 'done') return;
        this.#endCause ??= 'lease';
        this.#ctrl.abort(new LeaseLostError(workId, `work item ${workId}: lease ended (${lease.reason})`));
      },
      { once: true },
    );
  }

  /** Stop listening to the caller's signal. */
  dispose(): void {
    this.#detach();
  }
}
