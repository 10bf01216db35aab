import type { EventEmitter } from 'node:events';
import type { WorkerEventMap } from '../worker/events.js';

/**
 * What the metrics and health endpoints read from a worker: its events plus three gauges. An
 * `EnvironmentWorker` is one; tests may pass any EventEmitter with these fields.
 */
export interface ObservedWorker extends EventEmitter<WorkerEventMap> {
  /** Sessions running now. */
  readonly activeSessions: number;
  /** True once the worker is closing; `/readyz` then fails. */
  readonly closing: boolean;
  /** Monotonic ms (see `src/internal/clock.ts`) of the last successful poll; undefined before the first. */
  readonly lastPollOkAt: number | undefined;
}
