// Pins the work queue gauges: serveMetrics with `workQueue` (and no worker) exports the
// environment's queue depth, pending count and oldest item age read from the work stats endpoint
// with the environment key, labelled by environment; several scrapes within maxAgeMs cost one API
// call; a failed read leaves the gauges without a sample (an autoscaler sees no data, not an empty
// queue) and counts the failure (one warning, repeats at debug, lines tagged component "metrics").
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { serveMetrics, type MetricsServer } from '../../src/metrics/index.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';

const STATS_ROUTE = 'GET /v1/environments/:id/work/stats';

describe('the work queue gauges', () => {
  let emu: Emulator;
  let tmp: string;
  let server: MetricsServer | undefined;
  let client: Anthropic;
  beforeAll(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-queue-metrics-'));
    emu = await startEmulator({ mountRoot: tmp, latencyMs: 0 });
    client = new Anthropic({ apiKey: 'sk-ant-api-unused', baseURL: emu.baseURL, logLevel: 'off' });
  });
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });
  afterAll(async () => {
    await emu?.close();
    await fs.rm(tmp, { recursive: true, force: true });
  });

  async function scrape(s: MetricsServer): Promise<string> {
    const res = await fetch(`${s.url}/metrics`);
    expect(res.status).toBe(200);
    return res.text();
  }

  it('exports the depth, the pending count and the oldest age of the queue, read with the environment key', async () => {
    let now = 0;
    server = await serveMetrics({
      port: 0,
      host: '127.0.0.1',
      processMetrics: false,
      clock: { now: () => now },
      workQueue: { client, environmentId: emu.environmentId, environmentKey: emu.environmentKey },
    });
    const env = emu.environmentId;
    const empty = await scrape(server);
    expect(empty).toContain(`maw_work_queue_depth{environment_id="${env}"} 0`);
    expect(empty).toContain(`maw_work_queue_oldest_age_seconds{environment_id="${env}"} 0`);

    for (let i = 0; i < 3; i++) await emu.createSession({ script: [] });
    now += 5_000;
    const text = await scrape(server);
    expect(text).toContain(`maw_work_queue_depth{environment_id="${env}"} 3`);
    expect(text).toContain(`maw_work_queue_pending{environment_id="${env}"} 0`);
    expect(text).toMatch(new RegExp(`^maw_work_queue_oldest_age_seconds\\{environment_id="${env}"\\} \\d`, 'm'));
    expect(text).toContain(`maw_work_queue_stats_failures_total{environment_id="${env}"} 0`);
    // No worker: the worker's counters are absent and /readyz says why it is ready.
    expect(text).not.toContain('maw_items_claimed_total');
    expect(await (await fetch(`${server.url}/readyz`)).text()).toContain('exporting the work queue only');
    const stats = emu.requests.filter((r) => r.route === STATS_ROUTE);
    expect(stats.length).toBeGreaterThan(0);
    expect(stats.every((r) => r.credential === 'environment_key')).toBe(true);
  });

  it('reuses a reading for maxAgeMs, so several scrapers cost one call per period', async () => {
    let now = 0;
    server = await serveMetrics({
      port: 0,
      host: '127.0.0.1',
      processMetrics: false,
      clock: { now: () => now },
      workQueue: { client, environmentId: emu.environmentId, environmentKey: emu.environmentKey, maxAgeMs: 10_000 },
    });
    emu.clearRequests();
    await Promise.all([scrape(server), scrape(server), scrape(server)]);
    now += 9_000;
    await scrape(server);
    expect(emu.requests.filter((r) => r.route === STATS_ROUTE)).toHaveLength(1);
    now += 2_000;
    await scrape(server);
    expect(emu.requests.filter((r) => r.route === STATS_ROUTE)).toHaveLength(2);
  });

  it('leaves the gauges without a sample while the stats cannot be read, and counts each failure', async () => {
    let now = 0;
    const lines: Array<{ level: number; msg: string }> = [];
    const logger = pino({ level: 'debug' }, { write: (l: string) => lines.push(JSON.parse(l) as { level: number; msg: string }) });
    server = await serveMetrics({
      port: 0,
      host: '127.0.0.1',
      processMetrics: false,
      clock: { now: () => now },
      logger,
      workQueue: { client, environmentId: emu.environmentId, environmentKey: 'not-a-real-key' },
    });
    const env = emu.environmentId;
    const first = await scrape(server);
    expect(first).not.toMatch(/^maw_work_queue_depth\{/m);
    expect(first).toContain('# TYPE maw_work_queue_depth gauge');
    expect(first).toContain(`maw_work_queue_stats_failures_total{environment_id="${env}"} 1`);
    now += 10_000;
    const second = await scrape(server);
    expect(second).toContain(`maw_work_queue_stats_failures_total{environment_id="${env}"} 2`);
    // The first failure is a warning; a repeat is debug only.
    expect(lines.filter((l) => l.level === 40 && l.msg.startsWith('reading the work queue stats failed'))).toHaveLength(1);
    expect(JSON.stringify(lines)).not.toContain('not-a-real-key');
    // One field style: the endpoint's lines carry `component`, ids in snake_case.
    const warn = lines.find((l) => l.level === 40) as Record<string, unknown>;
    expect(warn).toMatchObject({ component: 'metrics', environment_id: env });
    expect(lines.every((l) => !('scope' in l))).toBe(true);
  });
});
