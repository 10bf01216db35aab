import { setMaxListeners } from 'node:events';
import { coerceError } from '../../errors.js';
import { combineSignals } from '../../internal/abort.js';
import type { Clock } from '../../internal/clock.js';
import { errorSummary, type Logger } from '../../internal/logger.js';
import { idlePushDecision } from '../rules/idle-push-rule.js';
import { emptyReport } from '../rules/sync-report.js';
import type { SyncPhase } from '../rules/plan.js';
import type { SyncReport } from '../rules/types.js';

export interface SyncSchedulerOptions {
  clock: Clock;
  /** Least time between the starts of two syncs, in ms. */
  intervalMs: number;
  log: Logger;
  /** True once no routine sync may start (the session is finishing or its mount is gone). */
  closed: () => boolean;
  /** One sync pass over every store. */
  run: (phase: SyncPhase, signal: AbortSignal) => Promise<SyncReport>;
  /** Bound of the push when the session goes idle, in ms (the flush bound). */
  pushBoundMs: number;
  /** The push-only pass when the session goes idle. Default: `run('flush', signal)`. */
  push?: (signal: AbortSignal) => Promise<SyncReport>;
}

/**
 * When syncs run. Rules:
 * - at most one sync runs at a time;
 * - `afterToolCall` starts one when the interval has passed since the last one started, else arms
 *   a single trailing sync for when it has (never inside a tool call: the tool's own
 *   `afterToolCall` starts it), so an edit made in the last tool call of a turn reaches the store
 *   within one interval;
 * - `beforeToolCall` runs a due sync first (or waits for the running one), so the agent does not
 *   read a memory already known to be stale; its failure never stops the tool call;
 * - a sync that starts covers every tool call made so far: it cancels the armed trailing one;
 * - `sessionIdle` (the agent's turn ended) pushes the changed files at once, as the rules of
 *   `idlePushDecision` say, in a push-only pass bounded by `pushBoundMs`; the push is not a sync
 *   for the interval: it neither starts the interval over nor cancels the trailing sync, which
 *   still pulls and deletes in its time;
 * - every interval reads the injected monotonic clock.
 */
export class SyncScheduler {
  readonly #opts: SyncSchedulerOptions;
  #lastSyncAt: number;
  #running: Promise<SyncReport> | undefined;
  #runningCtrl: AbortController | undefined;
  #trailing: NodeJS.Timeout | undefined;
  /** Tool calls between `beforeToolCall` and `afterToolCall`; the trailing sync never lands inside one. */
  #toolCallsInFlight = 0;
  /** A push waits for the running sync to end. */
  #pushQueued = false;

  constructor(opts: SyncSchedulerOptions) {
    this.#opts = opts;
    // The download counts as the first sync.
    this.#lastSyncAt = opts.clock.now();
  }

  /** The sync running now, if any. */
  get running(): Promise<SyncReport> | undefined {
    return this.#running;
  }

  async beforeToolCall(): Promise<void> {
    try {
      if (this.#opts.closed()) return;
      if (this.#running) {
        await this.#running;
        return;
      }
      if (this.#due()) await this.start();
    } catch (err) {
      this.#opts.log.warn({ error: errorSummary(coerceError(err)) }, 'memory sync before a tool call failed; the tool call runs anyway');
    } finally {
      this.#toolCallsInFlight++;
    }
  }

  afterToolCall(): void {
    this.#toolCallsInFlight = Math.max(0, this.#toolCallsInFlight - 1);
    try {
      if (this.#opts.closed()) return;
      if (!this.#running && this.#due()) {
        void this.start().catch(() => {});
        return;
      }
      this.#armTrailing();
    } catch (err) {
      this.#opts.log.warn({ error: errorSummary(coerceError(err)) }, 'memory sync after a tool call failed');
    }
  }

  /** A sync after the running one, if any; an empty report once closed. Rejects only when `signal` aborts. */
  async syncNow(signal?: AbortSignal): Promise<SyncReport> {
    if (this.#opts.closed()) return emptyReport();
    while (this.#running) {
      await this.#running.catch(() => {});
      if (this.#opts.closed()) return emptyReport();
    }
    return this.start(signal);
  }

  /**
   * The session went idle: push the files changed since the last sync now (or once the running
   * sync ends), bounded by `pushBoundMs`. Never throws; a failed push is logged, and the files it
   * did not upload go up with the next sync.
   */
  sessionIdle(): void {
    const decision = idlePushDecision({
      closed: this.#opts.closed(),
      toolCallsInFlight: this.#toolCallsInFlight,
      syncRunning: this.#running !== undefined,
      pushQueued: this.#pushQueued,
    });
    switch (decision) {
      case 'none':
        return;
      case 'push-after-running':
        this.#pushQueued = true;
        void this.#running!.catch(() => {}).finally(() => {
          this.#pushQueued = false;
          this.sessionIdle();
        });
        return;
      case 'push-now': {
        const bound = combineSignals([], this.#opts.pushBoundMs);
        const push = this.#opts.push ?? ((signal: AbortSignal) => this.#opts.run('flush', signal));
        this.#opts.log.debug({ bound_ms: this.#opts.pushBoundMs }, 'session idle; pushing the changed memory files now');
        void this.#launch(push, bound.signal)
          .catch((err: unknown) => {
            this.#opts.log.warn({ error: errorSummary(coerceError(err)) }, 'memory push on idle failed; the next sync uploads the changes');
          })
          .finally(() => bound.dispose());
        return;
      }
      default:
        return decision satisfies never;
    }
  }

  /**
   * Start a sync of `phase` now, whether closed or not (the finish runs its last passes through
   * it). Rejects with the reason when `signal` aborted.
   */
  start(signal?: AbortSignal, phase: SyncPhase = 'sync'): Promise<SyncReport> {
    this.#lastSyncAt = this.#opts.clock.now();
    this.cancelTrailing();
    return this.#launch((combined) => this.#opts.run(phase, combined), signal);
  }

  /** Run `pass` as the one running sync; rejects with the reason when `signal` aborted. */
  #launch(pass: (signal: AbortSignal) => Promise<SyncReport>, signal?: AbortSignal): Promise<SyncReport> {
    const ctrl = new AbortController();
    const combined = combineSignals([signal, ctrl.signal]);
    // Every request in flight listens on this one signal.
    setMaxListeners(10_000, combined.signal);
    this.#runningCtrl = ctrl;
    const run = pass(combined.signal).finally(() => {
      combined.dispose();
      if (this.#running === run) {
        this.#running = undefined;
        this.#runningCtrl = undefined;
      }
    });
    this.#running = run;
    return run.then((report) => {
      if (signal?.aborted) throw coerceError(signal.reason);
      return report;
    });
  }

  /** Abort the running sync's requests (the finish's bound expired). */
  abortRunning(reason: unknown): void {
    this.#runningCtrl?.abort(reason);
  }

  /** Drop the armed trailing sync, if any. */
  cancelTrailing(): void {
    if (this.#trailing) clearTimeout(this.#trailing);
    this.#trailing = undefined;
  }

  #due(): boolean {
    return this.#opts.clock.now() - this.#lastSyncAt >= this.#opts.intervalMs;
  }

  #armTrailing(): void {
    if (this.#trailing || this.#opts.closed()) return;
    const waitMs = Math.max(0, this.#opts.intervalMs - (this.#opts.clock.now() - this.#lastSyncAt));
    this.#trailing = setTimeout(() => {
      this.#trailing = undefined;
      if (this.#opts.closed()) return;
      // A tool is running: its afterToolCall starts the due sync once the tool is done.
      if (this.#toolCallsInFlight > 0) return;
      if (this.#running) {
        // Re-check once the running sync is over.
        void this.#running.finally(() => this.#armTrailing()).catch(() => {});
        return;
      }
      if (this.#due()) void this.start().catch(() => {});
      else this.#armTrailing();
    }, waitMs);
    this.#trailing.unref();
  }
}
