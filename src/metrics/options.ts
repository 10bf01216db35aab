import { z } from 'zod/v3';
import type { Registry } from 'prom-client';
import type { Clock } from '../internal/clock.js';
import type { Logger } from '../internal/logger.js';
import { isObject, looksLikeClient, looksLikeLogger, parseOptions } from '../internal/option-schema.js';
import type { ObservedWorker } from './observed-worker.js';
import type { PrometheusMetricsOptions } from './prometheus-metrics.js';
import type { WorkQueueSource } from './work-queue.js';

/** Options of {@link serveMetrics}: the Prometheus options plus the worker, the queue, and where to listen. */
export interface MetricsServerOptions extends PrometheusMetricsOptions {
  /**
   * The worker whose events and gauges are exported, and whose state `/readyz` reports. Optional
   * when `workQueue` is given: a process that only exports the queue depth (for an autoscaler) needs
   * no worker.
   */
  worker?: ObservedWorker;
  /**
   * Export the environment's work queue (`<prefix>work_queue_depth`, `…_pending`,
   * `…_oldest_age_seconds`), read from the work stats endpoint at scrape time. Default: not exported.
   */
  workQueue?: WorkQueueSource;
  /** TCP port, 0 to 65535; 0 picks a free one (read it back from `server.port`). */
  port: number;
  /** Interface to bind. Default `0.0.0.0` (orchestrators probe from outside the container). */
  host?: string;
  /**
   * Milliseconds: `/readyz` fails when no poll succeeded for this long and no session is running.
   * Default 60 000 (an idle worker polls every few seconds; a worker at its concurrency limit does not poll).
   */
  readyWithinMs?: number;
  /** Default: warn and above to stderr. */
  logger?: Logger;
  /** @internal test clock; must be the clock the worker stamps `lastPollOkAt` with. */
  clock?: Clock;
}

const isFunction = (v: unknown): boolean => typeof v === 'function';

function looksLikeWorker(v: unknown): boolean {
  return isObject(v) && isFunction(v['on']) && isFunction(v['off']) && 'activeSessions' in v && 'closing' in v;
}

function looksLikeRegistry(v: unknown): boolean {
  return isObject(v) && isFunction(v['metrics']) && isFunction(v['registerMetric']);
}

const WORK_QUEUE_KEYS = ['client', 'environmentId', 'environmentKey', 'maxAgeMs', 'timeoutMs'];

const workQueueSchema = z
  .object({
    client: z.custom<WorkQueueSource['client']>(looksLikeClient),
    environmentId: z.string().min(1),
    environmentKey: z.string().min(1).optional(),
    maxAgeMs: z.number().int().min(1_000).optional(),
    timeoutMs: z.number().int().min(1).optional(),
  })
  .passthrough()
  // Checked here rather than by a strict object, so the message names `workQueue` and the key.
  .superRefine((o, ctx) => {
    const unknown = Object.keys(o).filter((k) => !WORK_QUEUE_KEYS.includes(k));
    if (unknown.length > 0) ctx.addIssue({ code: 'custom', message: `unknown key ${unknown.join(', ')}` });
  });

const fieldsSchema = z
  .object({
    worker: z.custom<ObservedWorker>(looksLikeWorker).optional(),
    workQueue: workQueueSchema.optional(),
    port: z.number().int().min(0).max(65_535),
    host: z.string().min(1).optional(),
    readyWithinMs: z.number().int().positive().optional(),
    logger: z.custom<Logger>(looksLikeLogger).optional(),
    clock: z.custom<Clock>((v) => isObject(v) && isFunction(v['now'])).optional(),
    registry: z.custom<Registry>(looksLikeRegistry).optional(),
    prefix: z
      .string()
      .regex(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/)
      .optional(),
    processMetrics: z.boolean().optional(),
  })
  .strict();

// Reported with the other problems, not only once they are fixed: both sides of an intersection
// are parsed, where a refinement of the object itself would run only once its fields are valid.
const schema = z.intersection(
  fieldsSchema,
  z
    .object({ worker: z.unknown(), workQueue: z.unknown() })
    .passthrough()
    .refine((o) => o.worker !== undefined || o.workQueue !== undefined, {
      path: ['worker'],
      message: 'a worker, or workQueue to export the queue depth alone',
    }),
);

const EXPECTED: Record<keyof MetricsServerOptions, string> = {
  worker: 'an EnvironmentWorker (an EventEmitter with activeSessions, closing and lastPollOkAt)',
  workQueue: '{ client, environmentId, environmentKey?, maxAgeMs? (integer >= 1000), timeoutMs? (integer >= 1) } and no other key',
  port: 'an integer from 0 to 65535',
  host: 'a non-empty host name or address',
  readyWithinMs: 'a positive integer number of milliseconds',
  logger: 'a pino logger',
  clock: 'a clock { now(): number }',
  registry: 'a prom-client Registry',
  prefix: 'a Prometheus metric name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*)',
  processMetrics: 'a boolean',
};

/** Validate {@link serveMetrics} options: every problem in one ConfigError; unknown keys refused. */
export function parseMetricsServerOptions(input: unknown): MetricsServerOptions {
  // The environment key inside `workQueue` is never echoed: an object is shown as "an object".
  return parseOptions(schema, input, { owner: 'serveMetrics', expected: EXPECTED }) as MetricsServerOptions;
}
