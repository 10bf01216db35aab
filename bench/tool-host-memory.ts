/**
 * What an idle sandboxed session costs in memory, and how long its tool host takes to start.
 *
 * {@link idleSandboxMemory} starts `sessions` real session sandboxes in this process (built as the
 * worker builds them: the probe's runtime, the per-session cgroups and default limits under a temp
 * state folder), makes a `bash` call (`true`) and a `read` call in each (`large`: then a `bash`
 * call that prints 2 MB, `seq 1 300000`), waits `idleMs`, then sums `Pss:`, `Rss:` and the
 * private pages of `/proc/<pid>/smaps_rollup` over every process of every sandbox (the launch
 * wrapper's processes, bubblewrap, the sandbox's init, the tool host, the toolset's shell): each
 * sandbox is one child of this process and everything below it. PSS splits the pages of the Node
 * executable among every process that maps them, this machine's other Node processes included;
 * private memory does not depend on them.
 * {@link hostStartMs} starts sandboxes one after another and times each from its start to its tool
 * host's `ready`.
 *
 * Runs the built tool host: `npm run build` first.
 *
 *   npx tsx bench/tool-host-memory.ts [--sessions 8,32] [--runs 3] [--starts 7] [--idle-ms 2000] [--large] [--json]
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import { sweepSandboxCgroups } from '../src/sandbox/limits/cgroup-sweep.js';
import { resolveSandboxOption } from '../src/sandbox/options.js';
import { resolveSandbox } from '../src/sandbox/resolve.js';
import { releaseSandboxRuntime, type SandboxRuntime } from '../src/sandbox/runtime.js';
import { SessionSandbox } from '../src/sandbox/session-sandbox.js';
import { sandboxMemory } from './sandbox-memory.js';

export interface IdleSandboxMemory {
  sessions: number;
  /** Mean PSS of one idle session's sandbox (all of its processes), MiB. */
  pssPerSessionMiB: number;
  /** Mean private memory (`Private_Clean` + `Private_Dirty`: not shared with any other process) of one idle session's sandbox, MiB. */
  privatePerSessionMiB: number;
  /** Mean RSS of one idle session's sandbox (all of its processes), MiB. */
  rssPerSessionMiB: number;
  /** RSS of this process (the worker) while the sandboxes idle, MiB. */
  workerRssMiB: number;
  /** Mean PSS per session by process name (`node`, `bwrap`, `bash`...), MiB. */
  pssByProcessMiB: Record<string, number>;
}

const log = pino({ level: 'silent' });

type BwrapRuntime = Extract<SandboxRuntime, { kind: 'bwrap' }>;

async function withRuntime<T>(use: (runtime: BwrapRuntime, dir: string) => Promise<T>): Promise<T> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-bench-host-memory-'));
  const stateDir = path.join(dir, 'state');
  await fsp.mkdir(stateDir);
  const runtime = await resolveSandbox(resolveSandboxOption('bwrap'), { log, concurrency: 64, stateDir });
  if (runtime.kind !== 'bwrap') throw new Error('no bubblewrap sandbox starts on this host');
  try {
    return await use(runtime, dir);
  } finally {
    releaseSandboxRuntime(runtime);
    await sweepSandboxCgroups(stateDir, { alive: () => false });
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

async function newSandbox(runtime: BwrapRuntime, dir: string, i: number): Promise<SessionSandbox> {
  const workdir = path.join(dir, `work-${i}`);
  await fsp.mkdir(workdir);
  await fsp.writeFile(path.join(workdir, 'notes.txt'), 'one line\n');
  return new SessionSandbox(
    runtime,
    {
      workdir,
      allowedRoots: [],
      readOnlyRoots: [],
      maxFileBytes: undefined,
      hide: [path.join(dir, 'state')],
      sessionId: `bench-${i}`,
    },
    log,
  );
}

async function callTool(sandbox: SessionSandbox, name: string, input: unknown): Promise<void> {
  const tool = sandbox.tools().find((t) => t.name === name);
  if (tool === undefined) throw new Error(`the toolset has no ${name} tool`);
  await tool.run(input as never, undefined as never);
}

/** Start `sessions` sandboxes, one `bash` and one `read` call in each (and a large one), then measure them idle. */
export async function idleSandboxMemory(opts: { sessions: number; idleMs?: number; large?: boolean }): Promise<IdleSandboxMemory> {
  return withRuntime(async (runtime, dir) => {
    const sandboxes: SessionSandbox[] = [];
    try {
      for (let i = 0; i < opts.sessions; i++) sandboxes.push(await newSandbox(runtime, dir, i));
      const problems = await Promise.all(sandboxes.map((s) => s.started()));
      const problem = problems.find((p) => p !== undefined);
      if (problem !== undefined) throw new Error(`a sandbox did not start: ${problem}`);
      await Promise.all(
        sandboxes.map(async (s) => {
          await callTool(s, 'bash', { command: 'true' });
          await callTool(s, 'read', { file_path: 'notes.txt' });
          if (opts.large === true) await callTool(s, 'bash', { command: 'seq 1 300000' });
        }),
      );
      await sleep(opts.idleMs ?? 2_000);
      const measured = await sandboxMemory(process.pid);
      if (measured.sandboxes !== opts.sessions) throw new Error(`found ${measured.sandboxes} sandboxes, expected ${opts.sessions}`);
      const perSession = (kiB: number): number => kiB / 1024 / opts.sessions;
      return {
        sessions: opts.sessions,
        pssPerSessionMiB: perSession(measured.pssKiB),
        rssPerSessionMiB: perSession(measured.rssKiB),
        privatePerSessionMiB: perSession(measured.privateKiB),
        workerRssMiB: process.memoryUsage().rss / 1024 / 1024,
        pssByProcessMiB: Object.fromEntries(Object.entries(measured.pssKiBByName).map(([k, v]) => [k, perSession(v)])),
      };
    } finally {
      await Promise.all(sandboxes.map((s) => s.close()));
    }
  });
}

/** Milliseconds from each sandbox's start to its tool host's `ready`, `runs` sandboxes one after another. */
export async function hostStartMs(opts: { runs: number }): Promise<number[]> {
  return withRuntime(async (runtime, dir) => {
    const times: number[] = [];
    // One start first, left out: it loads this process's code and warms the page cache.
    for (let i = -1; i < opts.runs; i++) {
      const sandbox = await newSandbox(runtime, dir, i + 1);
      try {
        const t0 = performance.now();
        const problem = await sandbox.started();
        const ms = performance.now() - t0;
        if (problem !== undefined) throw new Error(`a sandbox did not start: ${problem}`);
        if (i >= 0) times.push(ms);
      } finally {
        await sandbox.close();
      }
    }
    return times;
  });
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function spread(xs: readonly number[], digits: number): string {
  return `${median(xs).toFixed(digits)} [${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}]`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      sessions: { type: 'string', default: '8,32' },
      runs: { type: 'string', default: '3' },
      starts: { type: 'string', default: '7' },
      'idle-ms': { type: 'string', default: '2000' },
      large: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
  });
  const runs = Number(values.runs);
  const idleMs = Number(values['idle-ms']);
  const out: Record<string, unknown> = {};
  for (const sessions of values.sessions.split(',').map(Number)) {
    const results: IdleSandboxMemory[] = [];
    for (let r = 0; r < runs; r++) results.push(await idleSandboxMemory({ sessions, idleMs, large: values.large }));
    out[`N=${sessions}`] = results;
    if (!values.json) {
      const names = [...new Set(results.flatMap((x) => Object.keys(x.pssByProcessMiB)))];
      const byName = names.map((n) => `${n} ${median(results.map((x) => x.pssByProcessMiB[n] ?? 0)).toFixed(2)}`).join(', ');
      console.log(
        `N=${sessions} (${runs} runs, median [min–max]): PSS/session ${spread(
          results.map((x) => x.pssPerSessionMiB),
          2,
        )} MiB, private/session ${spread(
          results.map((x) => x.privatePerSessionMiB),
          2,
        )} MiB, RSS/session ${spread(
          results.map((x) => x.rssPerSessionMiB),
          1,
        )} MiB, worker RSS ${spread(
          results.map((x) => x.workerRssMiB),
          0,
        )} MiB; PSS/session by process: ${byName}`,
      );
    }
  }
  const starts = Number(values.starts);
  if (starts > 0) {
    const times = await hostStartMs({ runs: starts });
    out['startMs'] = times;
    if (!values.json) console.log(`start -> ready (${starts} starts, median [min–max]): ${spread(times, 0)} ms`);
  }
  if (values.json) console.log(JSON.stringify(out));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
