/**
 * `npm run bench:timeline -- ID [--kind ours|official] [--base REF] [--latency MS] [--profile DIR] [--mount-root DIR]`: runs one
 * benchmark scenario once and prints the emulator's request log as a timeline (ms from the first
 * request, route, status, answer time), then a summary per route: where the wall time of a row goes.
 * Runs of the same route are folded into one line (`×N`, first start → last end). `--base REF` runs
 * ours as of git commit REF (as `npm run bench -- --base`).
 */
import { parseArgs } from 'node:util';
import { buildChildren, type ChildKind } from './build-children.js';
import { defaultTempParent, endOf, withJob } from './job.js';
import { scenarios } from './scenarios.js';
import type { RequestRecord } from '../src/testing/index.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    kind: { type: 'string', default: 'ours' },
    latency: { type: 'string', default: '10' },
    profile: { type: 'string' },
    quick: { type: 'boolean', default: false },
    base: { type: 'string' },
    'mount-root': { type: 'string' },
  },
});
const id = positionals[0];
const scenario = scenarios(values.quick === true).find((s) => s.id === id);
if (scenario === undefined)
  throw new Error(
    `usage: bench:timeline ID; ID is one of ${scenarios(false)
      .map((s) => s.id)
      .join(', ')}`,
  );
const kind: ChildKind = values.base !== undefined ? 'official' : (values.kind as ChildKind);
const bundles = await buildChildren(values.base !== undefined ? { baseRef: values.base } : {});
const execArgv = values.profile !== undefined ? ['--cpu-prof', '--cpu-prof-dir', values.profile] : [];

let log: RequestRecord[] = [];
const tempParent = values['mount-root'] ?? defaultTempParent();
const metrics = await withJob(
  {
    kind,
    oursAsBase: values.base !== undefined,
    bundle: bundles[kind],
    latencyMs: Number(values.latency),
    quick: values.quick === true,
    tempParent,
    execArgv,
  },
  async (ctx) => {
    const m = await scenario.run(ctx);
    log = [...ctx.emu.requests].sort((a, b) => a.startedAt - b.startedAt);
    return m;
  },
);

const t0 = log[0]?.startedAt ?? 0;
const label = (r: RequestRecord): string => `${r.route} ${r.status}`;
const lines: string[] = [];
for (let i = 0; i < log.length;) {
  let j = i + 1;
  while (j < log.length && label(log[j]!) === label(log[i]!)) j++;
  const run = log.slice(i, j);
  const start = run[0]!.startedAt - t0;
  const end = Math.max(...run.map(endOf)) - t0;
  const ms = run.map((r) => r.ms);
  // Mean requests in flight over the run: how much of the configured concurrency it used.
  const inFlight = end > start ? ms.reduce((a, b) => a + b, 0) / (end - start) : 1;
  lines.push(
    `${String(start).padStart(7)} → ${String(end).padStart(7)} ms  ${run.length > 1 ? `×${run.length}`.padEnd(5) : '     '} ${label(run[0]!)}  (answer ${Math.min(...ms)}–${Math.max(...ms)} ms${run.length > 1 ? `, ${inFlight.toFixed(1)} in flight` : ''})`,
  );
  i = j;
}
process.stdout.write(`${lines.join('\n')}\n\n${scenario.id} ${kind}: ${JSON.stringify(metrics)}\n`);
