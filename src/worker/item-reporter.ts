import type { EventEmitter } from 'node:events';
import type { Clock } from '../internal/clock.js';
import { errorSummary, type Logger } from '../internal/logger.js';
import { safeEmit } from '../internal/safe-emit.js';
import type { ItemOutcome, ItemStatus, WorkerEventMap } from './events.js';
import type { FinishReport } from './memory-port.js';
import type { WorkerMetrics } from './metrics.js';
import type { ClaimedWork } from './poller.js';

/** Emits one worker event; a throwing listener is logged, never thrown. */
export type WorkerEmit = <K extends keyof WorkerEventMap>(name: K, ...payload: WorkerEventMap[K]) => void;

/**
 * What one work item tells the world: its logger (scoped to its work and session ids), its events
 * and its counters, and the outcome it returns, timed from the reporter's creation on `clock`.
 */
export class ItemReporter {
  readonly workId: string;
  /** The session id, when the item is a session. */
  readonly sessionId: string | undefined;
  readonly log: Logger;
  readonly emit: WorkerEmit;
  /** True when the worker has a listener for `name`: an event nobody hears need not be built. */
  readonly listens: (name: keyof WorkerEventMap) => boolean;
  readonly #metrics: WorkerMetrics;
  readonly #clock: Clock;
  readonly #startedAt: number;

  constructor(work: ClaimedWork, deps: { logger: Logger; emitter: EventEmitter<WorkerEventMap>; metrics: WorkerMetrics; clock: Clock }) {
    this.workId = work.id;
    this.sessionId = work.data.type === 'session' ? work.data.id : undefined;
    this.log = deps.logger.child({ work_id: work.id, ...(this.sessionId ? { session_id: this.sessionId } : {}) });
    this.emit = (name, ...payload) => safeEmit(deps.emitter, this.log, name, ...payload);
    this.listens = (name) => deps.emitter.listenerCount(name) > 0;
    this.#metrics = deps.metrics;
    this.#clock = deps.clock;
    this.#startedAt = deps.clock.now();
  }

  /** The item could not even be acquired: count it failed and say so. */
  notAcquired(error: Error): ItemOutcome {
    this.#metrics.add('itemsFailed');
    this.emit('workFailed', { workId: this.workId, sessionId: this.sessionId, error });
    return this.#outcome('failed', error);
  }

  /** The lease was lost: the item is left to its new owner, never stopped by us. */
  leaseLost(reason: 'lease_lost' | 'assumed_lost'): void {
    this.#metrics.add('leaseLosses');
    this.log.warn({ reason }, 'lease lost; the work item is left to its new owner, not stopped');
    this.emit('leaseLost', { workId: this.workId, sessionId: this.sessionId, reason });
  }

  /** The item ran its course (teardown included): count it, log it, and close its session's events. */
  ended(end: { status: ItemStatus; error: Error | undefined; sessionStarted: boolean; flush: FinishReport | undefined }): ItemOutcome {
    const { status, error, flush } = end;
    const outcome = this.#outcome(status, error);
    if (status === 'failed') {
      this.#metrics.add('itemsFailed');
      this.log.error({ error: errorSummary(error) }, 'work item failed');
      this.log.debug({ err: error }, 'work item failure, with its stack');
      this.emit('workFailed', { workId: this.workId, sessionId: this.sessionId, error: error ?? new Error('work item failed') });
    } else if (status === 'completed' || status === 'skipped' || status === 'stopped_by_server') {
      this.#metrics.add('itemsCompleted');
    }
    this.log.info({ status, duration_ms: outcome.durationMs }, 'work item done');
    if (end.sessionStarted && this.sessionId !== undefined) {
      this.emit('sessionEnded', { workId: this.workId, sessionId: this.sessionId, outcome, ...(flush ? { flush } : {}) });
    }
    return outcome;
  }

  #outcome(status: ItemStatus, error: Error | undefined): ItemOutcome {
    return {
      workId: this.workId,
      sessionId: this.sessionId,
      status,
      ...(error ? { error } : {}),
      durationMs: this.#clock.now() - this.#startedAt,
    };
  }
}
