// Pins the one place for defaults: what resolveWorkerOptions fills in, what the CLI help says and
// what the option tables of docs/options.md show are the values of src/internal/defaults.ts, so a
// default changed there and nowhere else fails here until that page says the same.
import * as fs from 'node:fs';
import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { addWorkerFlags } from '../../src/cli/worker-flags.js';
import { LAUNCHER_DEFAULTS, MEMORY_DEFAULTS, METRICS_DEFAULTS, WEBHOOK_DEFAULTS, WORKER_DEFAULTS } from '../../src/internal/defaults.js';
import { resolveWorkerOptions } from '../../src/worker/options.js';

const readme = fs.readFileSync(path.join(__dirname, '../../docs/options.md'), 'utf8');
/** A number as the docs write it in prose and tables: groups of three digits split by a space. */
const spaced = (n: number): string => n.toLocaleString('en-US').replaceAll(',', ' ');
/** The options page's row of the worker option `name`. */
const row = (name: string): string =>
  readme.split('\n').find((l) => l.startsWith(`| \`${name}\` |`)) ?? `(no docs/options.md row for ${name})`;

describe('the worker option defaults', () => {
  it('are what resolveWorkerOptions fills in', () => {
    const o = resolveWorkerOptions({ client: new Anthropic({ apiKey: 'sk-test', baseURL: 'http://127.0.0.1:1' }) });
    expect(o).toMatchObject({
      concurrency: WORKER_DEFAULTS.concurrency,
      memorySyncDeletions: WORKER_DEFAULTS.memorySyncDeletions,
      pathWaitMs: WORKER_DEFAULTS.pathWaitMs,
      mountTimeoutMs: WORKER_DEFAULTS.mountTimeoutMs,
      memorySyncIntervalMs: MEMORY_DEFAULTS.syncIntervalMs,
      finalFlushMs: MEMORY_DEFAULTS.finalFlushMs,
      memoryDeleteAfterMs: MEMORY_DEFAULTS.deleteAfterMs,
    });
  });

  const readmeRows = [
    { description: 'maxIdleMs', option: 'maxIdleMs', shows: [`| ${spaced(WORKER_DEFAULTS.maxIdleMs)} |`] },
    {
      description: 'memorySyncIntervalMs, with its minimum',
      option: 'memorySyncIntervalMs',
      shows: [`| ${spaced(MEMORY_DEFAULTS.syncIntervalMs)} |`, `≥ ${spaced(MEMORY_DEFAULTS.syncIntervalMinMs)}`],
    },
    { description: 'memorySyncDeletions', option: 'memorySyncDeletions', shows: [`| \`${WORKER_DEFAULTS.memorySyncDeletions}\` |`] },
    {
      description: 'concurrency, with its cap',
      option: 'concurrency',
      shows: [`| ${WORKER_DEFAULTS.concurrency} |`, `1–${WORKER_DEFAULTS.concurrencyMax}`],
    },
    {
      description: 'finalFlushMs, with its range',
      option: 'finalFlushMs',
      shows: [
        `| ${spaced(MEMORY_DEFAULTS.finalFlushMs)} |`,
        `${MEMORY_DEFAULTS.finalFlushMinMs}–${spaced(MEMORY_DEFAULTS.finalFlushMaxMs)} ms`,
      ],
    },
    {
      description: 'memoryDeleteAfterMs, with its range',
      option: 'memoryDeleteAfterMs',
      shows: [`| ${spaced(MEMORY_DEFAULTS.deleteAfterMs)} |`, `0–${spaced(MEMORY_DEFAULTS.deleteAfterMaxMs)} ms`],
    },
    { description: 'pathWaitMs', option: 'pathWaitMs', shows: [`| ${spaced(WORKER_DEFAULTS.pathWaitMs)} |`] },
    {
      description: 'mountTimeoutMs, with its range',
      option: 'mountTimeoutMs',
      shows: [
        `| ${spaced(WORKER_DEFAULTS.mountTimeoutMs)} |`,
        `${spaced(WORKER_DEFAULTS.mountTimeoutMinMs)} – ${spaced(WORKER_DEFAULTS.mountTimeoutMaxMs)} ms`,
      ],
    },
  ];
  for (const r of readmeRows) {
    it(`are the options page's for ${r.description}`, () => {
      for (const text of r.shows) expect(row(r.option)).toContain(text);
    });
  }
});

describe('the other option defaults', () => {
  it("are the options page's for serveMetrics, createWebhookHandler and Launcher", () => {
    const us = (n: number): string => n.toLocaleString('en-US').replaceAll(',', '_');
    expect(readme).toContain(`readyWithinMs = ${us(METRICS_DEFAULTS.readyWithinMs)}, registry?, prefix = '${METRICS_DEFAULTS.prefix}'`);
    expect(readme).toContain(
      `concurrency = ${WEBHOOK_DEFAULTS.concurrency}, maxBodyBytes = ${WEBHOOK_DEFAULTS.maxBodyBytes / 1024 / 1024} MiB, dedupeWindow = ${spaced(WEBHOOK_DEFAULTS.dedupeWindow)}`,
    );
    expect(readme).toContain(`concurrency = ${LAUNCHER_DEFAULTS.concurrency}, killAfterMs = ${us(LAUNCHER_DEFAULTS.killAfterMs)}`);
  });
});

describe('the CLI help', () => {
  it('states the defaults of the worker flags', () => {
    const cmd = new Command('run');
    addWorkerFlags(cmd);
    const help = (flag: string): string => cmd.options.find((o) => o.long === flag)?.description ?? `(no ${flag})`;
    expect(help('--memory-sync-interval')).toContain(`>= ${MEMORY_DEFAULTS.syncIntervalMinMs} (default ${MEMORY_DEFAULTS.syncIntervalMs})`);
    expect(help('--memory-sync-deletions')).toContain(`(default ${WORKER_DEFAULTS.memorySyncDeletions})`);
    expect(help('--memory-delete-after')).toContain(`(default ${MEMORY_DEFAULTS.deleteAfterMs})`);
    expect(help('--max-idle')).toContain(`(default ${WORKER_DEFAULTS.maxIdleMs})`);
    expect(help('--final-flush')).toContain(`(default ${MEMORY_DEFAULTS.finalFlushMs})`);
  });
});
