import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { promClient } from './prom-client.js';
import { monotonicClock } from '../internal/clock.js';
import { METRICS_DEFAULTS } from '../internal/defaults.js';
import { resolveLogger } from '../internal/logger.js';
import type { ObservedWorker } from './observed-worker.js';
import { parseMetricsServerOptions, type MetricsServerOptions } from './options.js';
import { createPrometheusMetrics } from './prometheus-metrics.js';
import { registerWorkQueueMetrics, WorkQueueReader } from './work-queue.js';

export type { MetricsServerOptions } from './options.js';

/** A running health and metrics HTTP server, as {@link serveMetrics} resolves it. */
export interface MetricsServer {
  /** The port it listens on (the one picked when `port` was 0). */
  readonly port: number;
  /** `http://host:port` */
  readonly url: string;
  /** The prom-client registry `/metrics` serves (the `registry` option, or a new one). */
  readonly registry: Registry;
  /**
   * Stop the server (open connections closed) and stop listening to the worker. Idempotent: every call returns
   * the same promise.
   */
  close(): Promise<void>;
}

/** What `/readyz` answers, as {@link readiness} decides it. */
export interface Readiness {
  /** True when the worker is ready: `/readyz` answers 200, else 503. */
  ready: boolean;
  /** Why, in words (the body of `/readyz`). */
  reason: string;
}

/** Readiness rule of `/readyz`, pure: not closing, and a recent successful poll or a running session. */
export function readiness(
  w: Pick<ObservedWorker, 'closing' | 'activeSessions' | 'lastPollOkAt'>,
  nowMs: number,
  readyWithinMs: number,
): Readiness {
  if (w.closing) return { ready: false, reason: 'worker is shutting down' };
  if (w.activeSessions > 0) return { ready: true, reason: `${w.activeSessions} session(s) running` };
  if (w.lastPollOkAt === undefined) return { ready: false, reason: 'no successful poll yet' };
  const ageMs = nowMs - w.lastPollOkAt;
  if (ageMs > readyWithinMs) return { ready: false, reason: `last successful poll ${ageMs} ms ago (limit ${readyWithinMs} ms)` };
  return { ready: true, reason: `last successful poll ${ageMs} ms ago` };
}

/**
 * Serve `/healthz` (the process is alive), `/readyz` ({@link readiness}) and `/metrics`
 * (Prometheus text format) for one worker, and with `workQueue` the environment's queue depth.
 * Opt-in: the worker never opens a port by itself. Options are validated first: every problem in
 * one {@link ConfigError}.
 */
export async function serveMetrics(input: MetricsServerOptions): Promise<MetricsServer> {
  const options = parseMetricsServerOptions(input);
  const { collectDefaultMetrics, Registry } = promClient();
  const log = resolveLogger(options.logger).child({ component: 'metrics' });
  const clock = options.clock ?? monotonicClock;
  const readyWithinMs = options.readyWithinMs ?? METRICS_DEFAULTS.readyWithinMs;
  const registry = options.registry ?? new Registry();
  const prefix = options.prefix ?? METRICS_DEFAULTS.prefix;
  const processMetrics = options.processMetrics ?? true;
  const metrics = options.worker ? createPrometheusMetrics(options.worker, { registry, prefix, processMetrics }) : undefined;
  if (!options.worker && processMetrics) collectDefaultMetrics({ register: registry, prefix });
  if (options.workQueue) registerWorkQueueMetrics(registry, prefix, new WorkQueueReader(options.workQueue, clock, log));
  const ready = (worker: ObservedWorker | undefined): Readiness =>
    worker ? readiness(worker, clock.now(), readyWithinMs) : { ready: true, reason: 'exporting the work queue only' };

  const server = http.createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (url === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (url === '/readyz') {
      const r = ready(options.worker);
      res.writeHead(r.ready ? 200 : 503, { 'content-type': 'text/plain' }).end(`${r.ready ? 'ready' : 'not ready'}: ${r.reason}\n`);
    } else if (url === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        (err: unknown) => {
          log.error({ err }, 'collecting metrics failed');
          res.writeHead(500).end();
        },
      );
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`no route ${req.method} ${url}; try /healthz, /readyz or /metrics\n`);
    }
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host ?? '0.0.0.0';
  log.info({ port, host }, 'health and metrics endpoint listening');
  let closed: Promise<void> | undefined;
  return {
    port,
    url: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`,
    registry,
    close() {
      closed ??= new Promise<void>((resolve) => {
        metrics?.dispose();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
