/**
 * `npm run bench`: the official SDK EnvironmentWorker and ours, side by side, each in its own child
 * process, against the emulator served by this process with a fixed latency per answer. Every
 * repetition runs every scenario with both workers, alternating which goes first; the floor child
 * (a bare SDK client paging the same listings) runs in the same repetitions.
 *
 *   npm run bench -- [--reps N] [--latency MS] [--only ID[,ID]] [--kinds K[,K]] [--json] [--quick]
 *                   [--base REF] [--profile DIR] [--mount-root DIR] [--caps] [--sessions N]
 *
 * `--caps` adds the session at the API's caps (8 stores × 2 000 × 100 KiB, 1.6 GB of content; the
 * emulator holds it in this process): minutes long, so never in the default run (`--quick` runs a
 * tiny one, to prove it works).
 * `--sessions N` (default 500) is how many sessions the plateau row serves (RSS is read after the
 * first 50 and after the last). A scenario with its own latency (the 50 ms rows) ignores `--latency`.
 *
 * `--kinds ours[,official,floor]` runs only those children (the other columns stay empty).
 * `--base REF` replaces the official worker with ours as of git commit REF (before/after figures).
 * `--profile DIR` runs our child under `node --cpu-prof` and leaves one .cpuprofile per job in DIR.
 * `--mount-root DIR` puts every job's folders (mounts, workdir, state dir) under DIR instead of
 * tmpfs (`/dev/shm` when the host has one), to measure a real disk.
 *
 * `--quick` (the smoke mode CI runs) shrinks every scenario, runs one repetition and several jobs
 * at once: it proves the benchmark works, its figures mean nothing.
 */
import * as os from 'node:os';
import { parseArgs } from 'node:util';
import { buildChildren, type ChildKind } from './build-children.js';
import { defaultTempParent, withJob } from './job.js';
import { buildRows, formatTable, type RepResult } from './report.js';
import { scenarios } from './scenarios.js';

const { values } = parseArgs({
  options: {
    reps: { type: 'string' },
    latency: { type: 'string' },
    only: { type: 'string' },
    json: { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    profile: { type: 'string' },
    base: { type: 'string' },
    kinds: { type: 'string' },
    'mount-root': { type: 'string' },
    caps: { type: 'boolean', default: false },
    sessions: { type: 'string' },
  },
});
const sessions = Number(values.sessions ?? 500);
if (!Number.isInteger(sessions) || sessions < 51) throw new Error(`--sessions must be an integer above 50, got ${values.sessions}`);
const quick = values.quick === true;
const reps = Number(values.reps ?? (quick ? 1 : 3));
const latencyMs = Number(values.latency ?? 10);
if (!Number.isInteger(reps) || reps < 1) throw new Error(`--reps must be a positive integer, got ${values.reps}`);
if (!Number.isFinite(latencyMs) || latencyMs < 0) throw new Error(`--latency must be a number of ms >= 0, got ${values.latency}`);
const only = values.only?.split(',');
const kinds = values.kinds?.split(',');
const parallelJobs = quick ? 4 : 1;
const tempParent = values['mount-root'] ?? defaultTempParent();

const startedAt = Date.now();
const progress = (msg: string): void => {
  process.stderr.write(`${msg}\n`);
};
const bundles = await buildChildren(values.base !== undefined ? { baseRef: values.base } : {});
if (values.base !== undefined) progress(`the "official" column is ours as of ${values.base}`);
const chosen = scenarios(quick, { sessions })
  .filter((s) => s.optIn !== 'caps' || values.caps === true || quick)
  .filter((s) => only === undefined || only.includes(s.id));
const results: Record<string, RepResult[]> = {};

interface Job {
  rep: number;
  scenario: (typeof chosen)[number];
  kind: ChildKind;
}
const jobs: Job[] = [];
for (let rep = 0; rep < reps; rep++) {
  const pair: ChildKind[] = rep % 2 === 0 ? ['official', 'ours'] : ['ours', 'official'];
  for (const scenario of chosen) {
    results[scenario.id] ??= [];
    results[scenario.id]![rep] = {};
    for (const kind of [...pair, 'floor' as const])
      if (scenario.kinds.includes(kind) && (kinds === undefined || kinds.includes(kind))) jobs.push({ rep, scenario, kind });
  }
}

// In quick mode the jobs that wait out a sync interval start first, so the lanes overlap them.
if (quick) jobs.sort((a, b) => Number(b.scenario.waitsForSync === true) - Number(a.scenario.waitsForSync === true));

function profileArgs(kind: ChildKind): string[] {
  return values.profile !== undefined && kind === 'ours' ? ['--cpu-prof', '--cpu-prof-dir', values.profile] : [];
}

const failures: string[] = [];
let next = 0;
async function lane(): Promise<void> {
  while (next < jobs.length) {
    const job = jobs[next++]!;
    const t0 = Date.now();
    try {
      const metrics = await withJob(
        {
          kind: job.kind,
          oursAsBase: values.base !== undefined,
          bundle: bundles[job.kind],
          latencyMs: job.scenario.latencyMs ?? latencyMs,
          quick,
          tempParent,
          execArgv: profileArgs(job.kind),
        },
        (ctx) => job.scenario.run(ctx),
      );
      results[job.scenario.id]![job.rep]![job.kind] = metrics;
      progress(`rep ${job.rep + 1}/${reps} ${job.scenario.id} ${job.kind}: ${JSON.stringify(metrics)} (${Date.now() - t0} ms)`);
    } catch (e) {
      // One failed job leaves its figures empty (n/a in the table); the run goes on.
      failures.push(`rep ${job.rep + 1} ${job.scenario.id} ${job.kind}: ${e instanceof Error ? e.message : String(e)}`);
      progress(`FAILED ${failures.at(-1)}`);
    }
  }
}
await Promise.all(Array.from({ length: parallelJobs }, () => lane()));

const rows = buildRows(results);
const cpus = os.cpus();
const machine = `${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown CPU'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}, Node ${process.version}`;
if (values.json) {
  process.stdout.write(
    `${JSON.stringify({ machine, reps, latencyMs, quick, tempParent, base: values.base ?? null, failures, durationMs: Date.now() - startedAt, rows, results }, null, 2)}\n`,
  );
} else {
  const header = values.base !== undefined ? `(official column: ours as of ${values.base})\n` : '';
  process.stdout.write(
    `${header}${formatTable(rows)}\n\n${machine}; ${reps} repetition(s), emulator latency ${latencyMs} ms, folders under ${tempParent}; ${Math.round((Date.now() - startedAt) / 1000)} s\n`,
  );
}
if (failures.length > 0) process.exitCode = 1;
