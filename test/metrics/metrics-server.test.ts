// Pins the health and metrics endpoint: counters follow the worker's events by name, the active
// sessions gauge is read at scrape time, /readyz follows the readiness rule (closing, recent poll,
// running session), /healthz always answers, unknown routes name the good ones.
import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { emptyReport } from '../../src/memory/rules/sync-report.js';
import { readiness, serveMetrics, type MetricsServer } from '../../src/metrics/index.js';
import type { ObservedWorker } from '../../src/metrics/observed-worker.js';
import type { WorkerEventMap } from '../../src/worker/events.js';

class FakeWorker extends EventEmitter<WorkerEventMap> {
  activeSessions = 0;
  closing = false;
  lastPollOkAt: number | undefined = undefined;
}

const report = { ...emptyReport(), uploads: 1, durationMs: 250 };
const ids = { workId: 'work_1', sessionId: 'sesn_1' };

describe('readiness', () => {
  const rows = [
    { description: 'a closing worker is not ready', w: { closing: true, activeSessions: 1, lastPollOkAt: 1000 }, now: 1000, ready: false },
    {
      description: 'a worker that never polled is not ready',
      w: { closing: false, activeSessions: 0, lastPollOkAt: undefined },
      now: 1000,
      ready: false,
    },
    { description: 'a recent poll makes it ready', w: { closing: false, activeSessions: 0, lastPollOkAt: 900 }, now: 1000, ready: true },
    { description: 'a stale poll makes it unready', w: { closing: false, activeSessions: 0, lastPollOkAt: 0 }, now: 70_000, ready: false },
    {
      description: 'a running session keeps it ready without polls (at its concurrency limit)',
      w: { closing: false, activeSessions: 1, lastPollOkAt: 0 },
      now: 70_000,
      ready: true,
    },
  ];
  it.each(rows)('$description', ({ w, now, ready }) => {
    expect(readiness(w, now, 60_000).ready).toBe(ready);
  });
});

describe('serveMetrics', () => {
  let server: MetricsServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  async function start(worker: FakeWorker, now = 10_000): Promise<MetricsServer> {
    server = await serveMetrics({
      worker: worker as unknown as ObservedWorker,
      port: 0,
      host: '127.0.0.1',
      clock: { now: () => now },
      processMetrics: false,
    });
    return server;
  }

  it('counts events into Prometheus metrics and reads the active sessions at scrape time', async () => {
    const worker = new FakeWorker();
    const s = await start(worker);
    worker.emit('workClaimed', { workId: 'work_1', sessionId: 'sesn_1', environmentId: 'env_1' });
    worker.emit('workClaimed', { workId: 'work_2', sessionId: 'sesn_2', environmentId: 'env_1' });
    worker.emit('workFailed', { workId: 'work_2', sessionId: 'sesn_2', error: new Error('x') });
    worker.emit('leaseLost', { workId: 'work_2', sessionId: 'sesn_2', reason: 'lease_lost' });
    worker.emit('uploaded', { ...ids, storeId: 'memstore_1', path: 'a.md', sha: 'aa', created: true });
    worker.emit('downloaded', { ...ids, storeId: 'memstore_1', path: 'b.md', sha: 'bb' });
    worker.emit('conflict', { ...ids, storeId: 'memstore_1', path: 'b.md', conflictCopy: undefined });
    worker.emit('deleted', { ...ids, storeId: 'memstore_1', path: 'c.md', side: 'remote' });
    worker.emit('flushCutOff', { ...ids, phase: 'flush', boundMs: 30_000, pendingUploads: 2 });
    worker.emit('synced', { ...ids, storeId: undefined, report, phase: 'sync' });
    worker.activeSessions = 3;

    const res = await fetch(`${s.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toMatch(/^maw_items_claimed_total 2$/m);
    expect(text).toMatch(/^maw_items_failed_total 1$/m);
    expect(text).toMatch(/^maw_sessions_active 3$/m);
    expect(text).toMatch(/^maw_lease_losses_total\{reason="lease_lost"\} 1$/m);
    expect(text).toMatch(/^maw_memory_uploads_total 1$/m);
    expect(text).toMatch(/^maw_memory_downloads_total 1$/m);
    expect(text).toMatch(/^maw_memory_conflicts_total 1$/m);
    expect(text).toMatch(/^maw_memory_deletes_total\{side="remote"\} 1$/m);
    expect(text).toMatch(/^maw_memory_flush_cutoffs_total\{phase="flush"\} 1$/m);
    expect(text).toMatch(/^maw_memory_sync_duration_seconds_count\{phase="sync"\} 1$/m);
    expect(text).toMatch(/^maw_memory_sync_duration_seconds_sum\{phase="sync"\} 0.25$/m);
  });

  it('answers /healthz always and /readyz by the readiness rule', async () => {
    const worker = new FakeWorker();
    const s = await start(worker, 10_000);
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
    const before = await fetch(`${s.url}/readyz`);
    expect(before.status).toBe(503);
    expect(await before.text()).toContain('no successful poll yet');
    worker.lastPollOkAt = 9_500;
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
    worker.closing = true;
    const closing = await fetch(`${s.url}/readyz`);
    expect(closing.status).toBe(503);
    expect(await closing.text()).toContain('shutting down');
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
  });

  it('names the known routes on a 404 and stops listening to the worker once closed', async () => {
    const worker = new FakeWorker();
    const s = await start(worker);
    const res = await fetch(`${s.url}/nope`);
    expect(res.status).toBe(404);
    expect(await res.text()).toContain('/metrics');
    expect(worker.listenerCount('workClaimed')).toBe(1);
    await s.close();
    expect(worker.listenerCount('workClaimed')).toBe(0);
    server = undefined;
  });
});
