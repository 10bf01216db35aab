import type Anthropic from '@anthropic-ai/sdk';
import type { Registry } from 'prom-client';
import { promClient } from './prom-client.js';
import { toRemoteApiError } from '../api/classify.js';
import type { Clock } from '../internal/clock.js';
import { errorSummary, type Logger } from '../internal/logger.js';
import { scopedClient } from '../worker/scoped-client.js';

/** Where the queue gauges read the environment's work queue from. */
export interface WorkQueueSource {
  /** The SDK client; its base URL, timeouts and fetch settings are used for the stats call. */
  client: Anthropic;
  /** The self-hosted environment whose queue is exported (`env_...`). */
  environmentId: string;
  /**
   * Credential of the stats call: the environment key. Default: the client's own credential (an
   * API key works too).
   */
  environmentKey?: string;
  /**
   * Milliseconds a reading is reused, so several scrapers (Prometheus, KEDA) cost one API call per
   * period. Default 5 000; at least 1 000.
   */
  maxAgeMs?: number;
  /** Milliseconds a stats call may take before the scrape gives up on it. Default 5 000. */
  timeoutMs?: number;
}

/** One reading of the work queue. */
export interface WorkQueueStats {
  /** Items queued and not yet handed to a worker. */
  depth: number;
  /** Items handed to a worker by a poll and not yet acknowledged. */
  pending: number;
  /** RFC 3339 time of the oldest queued or pending item; null when there is none. */
  oldestQueuedAt: string | null;
}

export const WORK_QUEUE_MAX_AGE_DEFAULT_MS = 5_000;
export const WORK_QUEUE_TIMEOUT_DEFAULT_MS = 5_000;

/**
 * Reads the environment's work queue stats (`GET /v1/environments/:id/work/stats`). A reading is
 * reused for `maxAgeMs`; reads made while a call is in flight share it. A failed call is counted,
 * logged (the first of a run at warn, repeats at debug) and not cached: the next read tries again.
 */
export class WorkQueueReader {
  readonly environmentId: string;
  #client: Anthropic;
  #maxAgeMs: number;
  #timeoutMs: number;
  #clock: Clock;
  #log: Logger;
  #last: { atMs: number; stats: WorkQueueStats } | undefined;
  #inFlight: Promise<WorkQueueStats> | undefined;
  #failures = 0;
  #failing = false;

  constructor(source: WorkQueueSource, clock: Clock, log: Logger) {
    this.environmentId = source.environmentId;
    this.#client = source.environmentKey ? scopedClient(source.client, source.environmentKey) : source.client;
    this.#maxAgeMs = source.maxAgeMs ?? WORK_QUEUE_MAX_AGE_DEFAULT_MS;
    this.#timeoutMs = source.timeoutMs ?? WORK_QUEUE_TIMEOUT_DEFAULT_MS;
    this.#clock = clock;
    this.#log = log;
  }

  /** Failed calls so far. */
  get failures(): number {
    return this.#failures;
  }

  read(): Promise<WorkQueueStats> {
    if (this.#last && this.#clock.now() - this.#last.atMs < this.#maxAgeMs) return Promise.resolve(this.#last.stats);
    this.#inFlight ??= this.#fetch().finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  async #fetch(): Promise<WorkQueueStats> {
    const log = this.#log;
    try {
      // No retries: the next scrape is the retry, and a scrape must answer within its own timeout.
      const s = await this.#client.beta.environments.work.stats(this.environmentId, {}, { timeout: this.#timeoutMs, maxRetries: 0 });
      const stats = { depth: s.depth, pending: s.pending, oldestQueuedAt: s.oldest_queued_at };
      this.#last = { atMs: this.#clock.now(), stats };
      if (this.#failing) log.info({ environment_id: this.environmentId }, 'work queue stats readable again');
      this.#failing = false;
      return stats;
    } catch (e) {
      const err = toRemoteApiError(e, `reading the work queue stats of environment ${this.environmentId}`);
      this.#failures++;
      if (this.#failing) log.debug({ err, environment_id: this.environmentId }, 'work queue stats still unreadable');
      else
        log.warn(
          { error: errorSummary(err), environment_id: this.environmentId },
          'reading the work queue stats failed; the queue gauges have no sample until it works',
        );
      this.#failing = true;
      throw err;
    }
  }
}

/**
 * Register the work queue gauges, read at scrape time: `<prefix>work_queue_depth`,
 * `<prefix>work_queue_pending` and `<prefix>work_queue_oldest_age_seconds`, each labelled
 * `environment_id`. When a reading fails the gauges carry no sample (so an autoscaler sees "no
 * data", not an empty queue) and `<prefix>work_queue_stats_failures_total` counts it.
 */
export function registerWorkQueueMetrics(registry: Registry, prefix: string, reader: WorkQueueReader, now: () => number = Date.now): void {
  const { Counter, Gauge } = promClient();
  const registers = [registry];
  const labelNames = ['environment_id'] as const;
  const labels = { environment_id: reader.environmentId };
  new Counter({
    name: `${prefix}work_queue_stats_failures_total`,
    help: 'Reads of the work queue stats that failed (the queue gauges had no sample).',
    labelNames,
    registers,
    async collect() {
      // After this scrape's reading (shared with the gauges), so its failure is counted now.
      await reader.read().catch(() => undefined);
      this.reset();
      this.inc(labels, reader.failures);
    },
  });
  const gauge = (name: string, help: string, value: (s: WorkQueueStats) => number): void => {
    new Gauge({
      name: `${prefix}${name}`,
      help,
      labelNames,
      registers,
      async collect() {
        // The gauges of one scrape are collected together and share one reading.
        const stats = await reader.read().catch(() => undefined);
        this.reset();
        if (stats) this.set(labels, value(stats));
      },
    });
  };
  gauge(
    'work_queue_depth',
    'Work items queued in the environment and not yet handed to a worker (the autoscaling signal).',
    (s) => s.depth,
  );
  gauge('work_queue_pending', 'Work items handed to a worker by a poll and not yet acknowledged.', (s) => s.pending);
  gauge('work_queue_oldest_age_seconds', 'Age of the oldest queued or pending work item; 0 when there is none.', (s) =>
    s.oldestQueuedAt === null ? 0 : Math.max(0, (now() - Date.parse(s.oldestQueuedAt)) / 1000),
  );
}
