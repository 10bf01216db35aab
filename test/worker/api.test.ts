// Pins the public surface other code is written against: the names and shapes of the worker's
// methods, properties, events, outcome and metrics, exported from the package entry; and that no
// source file imports the SDK's own EnvironmentWorker or WorkPoller (the anchor is never wrapped).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expectTypeOf, it, expect } from 'vitest';
import * as pkg from '../../src/index.js';
import type { EnvironmentWorker, HandleItemOptions, ItemOutcome, WorkerEventMap, WorkerMetricsSnapshot } from '../../src/index.js';

describe('the EnvironmentWorker public API', () => {
  it('is exported from the package entry', () => {
    expect(typeof pkg.EnvironmentWorker).toBe('function');
    expect(pkg.MEMORY_SYNC_INTERVAL_MIN_MS).toBe(5_000);
    expect(new pkg.WorkItemFailedError({ workId: 'w', sessionId: undefined, status: 'failed', durationMs: 0 }).code).toBe(
      'MAW_WORK_FAILED',
    );
  });

  it('keeps the method and property names and types', () => {
    expectTypeOf<EnvironmentWorker['run']>().toEqualTypeOf<(signal?: AbortSignal) => Promise<void>>();
    expectTypeOf<EnvironmentWorker['handleItem']>().toEqualTypeOf<(opts?: HandleItemOptions) => Promise<ItemOutcome>>();
    expectTypeOf<EnvironmentWorker['close']>().toEqualTypeOf<() => Promise<void>>();
    expectTypeOf<EnvironmentWorker['onIdle']>().toEqualTypeOf<() => Promise<void>>();
    expectTypeOf<EnvironmentWorker['metrics']>().toEqualTypeOf<() => WorkerMetricsSnapshot>();
    expectTypeOf<EnvironmentWorker['workerId']>().toEqualTypeOf<string>();
    expectTypeOf<EnvironmentWorker['activeSessions']>().toEqualTypeOf<number>();
    expectTypeOf<EnvironmentWorker['lastPollOkAt']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<EnvironmentWorker['closing']>().toEqualTypeOf<boolean>();
  });

  it('keeps the outcome statuses and the event payloads', () => {
    expectTypeOf<ItemOutcome['status']>().toEqualTypeOf<
      'completed' | 'skipped' | 'failed' | 'lease_lost' | 'stopped_by_server' | 'aborted'
    >();
    expectTypeOf<WorkerEventMap['leaseLost'][0]['reason']>().toEqualTypeOf<'lease_lost' | 'assumed_lost'>();
    expectTypeOf<WorkerEventMap['sessionStarted'][0]>().toEqualTypeOf<{
      workId: string;
      sessionId: string;
      stores: number;
      readyMs: number;
    }>();
    expectTypeOf<WorkerEventMap['uploaded'][0]>().toMatchTypeOf<{ workId: string; sessionId: string; storeId: string; path: string }>();
    expectTypeOf<keyof WorkerMetricsSnapshot>().toEqualTypeOf<
      | 'itemsClaimed'
      | 'itemsCompleted'
      | 'itemsFailed'
      | 'sessionsActive'
      | 'leaseLosses'
      | 'uploads'
      | 'downloads'
      | 'conflicts'
      | 'deletes'
      | 'flushCutOffs'
      | 'syncs'
      | 'syncDurationMsTotal'
      | 'egressRefused'
      | 'sandboxMemoryLimitHits'
      | 'sandboxProcessLimitHits'
      | 'sandboxTmpFull'
    >();
  });
});

describe('the library source', () => {
  it("never imports the SDK's EnvironmentWorker or WorkPoller", () => {
    const srcDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src');
    const files = (fs.readdirSync(srcDir, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(50);
    const offenders = files.filter((f) => {
      const text = fs.readFileSync(path.join(srcDir, f), 'utf8');
      return /from '@anthropic-ai\/sdk\/lib\/environments|\bWorkPoller\b|import\s*\{[^}]*\bEnvironmentWorker\b[^}]*\}\s*from\s*'@anthropic-ai\/sdk/.test(
        text,
      );
    });
    expect(offenders).toEqual([]);
  });
});
