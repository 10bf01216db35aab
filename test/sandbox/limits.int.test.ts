// One tenant cannot starve another: with small limits (256 MiB, 128 processes, a 64 MiB /tmp)
// session A's bash runs a busy loop on every core, a 1 GiB allocation, a /tmp filler and a fork
// bomb (bounded to 200 processes, so the run without limits cannot hurt the machine), while session
// B beside it (concurrency 2) serves 10 tool calls and an edit of a memory. B completes with its
// edit in the store, no heartbeat loses its lease, the worker lives, A's results name each limit
// and the worker's events and metrics count them; every session cgroup is gone afterwards. With
// `limits: null` the same attacks succeed, so these assertions can fail. Real processes, in this
// host's real cgroup hierarchy (cgroup v1 as root here; v2 where the host has it).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { SandboxLimits } from '../../src/sandbox/limits/limits.js';
import { cgroupParentName, probeCgroupSupport } from '../../src/sandbox/limits/cgroup-host.js';
import type { WorkerEventMap } from '../../src/worker/events.js';
import { harness, type Harness } from '../worker/helpers.js';

const NODE = process.execPath;
const CORES = 2;

const ATTACKS = {
  /** Every core busy for 8 s (bounded by `timeout`), in the foreground while B works. */
  busy: `for i in $(seq ${CORES}); do timeout 8 sh -c 'while :; do :; done' & done; wait; echo busy-done`,
  /** 1 GiB allocated and touched. */
  allocate: `${NODE} -e "const a = []; for (let i = 0; i < 1024; i++) a.push(Buffer.alloc(1 << 20, 1)); console.log('allocated', a.length, 'MiB')"`,
  /** 100 MiB into /tmp. */
  fillTmp: `head -c 100M /dev/zero > /tmp/fill; echo "fill-exit=$?"; du -m /tmp/fill | cut -f1`,
  /** Fork until refused, at most 200 children, each gone after 30 s. */
  forkBomb:
    `/usr/bin/python3 -c 'import os, time\nn = 0\ntry:\n  for i in range(200):\n    if os.fork() == 0:\n      time.sleep(30); os._exit(0)\n    n += 1\n` +
    `except OSError as e:\n  print("refused", e.errno)\nprint("started", n)'`,
  /**
   * The classic bash fork bomb, then a busy wait in the shell itself (no fork) while it hits the
   * limit. Run only where the pids cgroup bounds it: unbounded, it would take the machine.
   */
  bashBomb: ':(){ :|:& };:; n=0; while [ $n -lt 300000 ]; do n=$((n+1)); done; echo planted',
  after: 'echo still-serving',
} as const;

type Attack = keyof typeof ATTACKS;
const BOUNDED: Attack[] = ['busy', 'allocate', 'fillTmp', 'forkBomb', 'after'];
const WITH_BASH_BOMB: Attack[] = ['busy', 'allocate', 'fillTmp', 'forkBomb', 'bashBomb', 'after'];
/** The pids cgroup bounds a sandbox on this host (else the bash fork bomb is never run). */
const pidsBounded = (() => {
  const probe = probeCgroupSupport();
  return probe.kind !== 'none' && probe.controllers.includes('pids');
})();

interface Run {
  h: Harness;
  texts: Record<Attack, string>;
  statusA: string;
  statusB: string;
  bResults: string[];
  storeB: Record<string, string>;
  hits: Array<WorkerEventMap['sandboxLimitHit'][0]>;
  metrics: ReturnType<ReturnType<Harness['worker']>['metrics']>;
  leaseRefusals: number;
  workerAlive: boolean;
  sessionA: string;
  log: string;
  /** The worker's `maw-<key>` parent cgroups still present after close(). */
  parentsLeft: string[];
}

let current: Harness | undefined;
afterEach(async () => {
  // A parent cgroup the worker left (it removes its own on close) goes with the temp state folder.
  if (current) for (const dir of parentCgroups(current.stateDir)) fs.rmdirSync(dir);
  await current?.cleanup();
  current = undefined;
});

async function runTenants(limits: SandboxLimits | null | undefined, order: Attack[] = BOUNDED): Promise<Run> {
  const h = await harness();
  current = h;
  const storeA = await h.emu.createMemoryStore({ name: 'Tenant A', memories: { '/a.md': 'A' } });
  const storeB = await h.emu.createMemoryStore({ name: 'Tenant B', memories: { '/b.md': 'B original' } });
  const sh = (command: string) => ({ tool: 'bash', input: { command: `{ ${command}; } 2>&1; echo "exit=$?"` } });
  const dirB = path.join(h.mountRoot, 'tenant-b');
  const a = await h.emu.createSession({
    resources: [{ memoryStoreId: storeA.id }],
    script: [{ sleepMs: 300 }, ...order.map((k) => sh(ATTACKS[k]))],
  });
  const bSteps = [];
  for (let i = 0; i < 10; i++) bSteps.push({ sleepMs: 700 }, sh(`echo b-call-${i}`));
  bSteps.splice(6, 0, { tool: 'write', input: { file_path: path.join(dirB, 'b.md'), content: 'B edited under load' } } as never);
  const b = await h.emu.createSession({ resources: [{ memoryStoreId: storeB.id }], script: bSteps as never });

  const worker = h.worker({ concurrency: 2, sandbox: limits === undefined ? 'bwrap' : { mode: 'bwrap', limits } });
  const hits: Run['hits'] = [];
  worker.on('sandboxLimitHit', (e) => hits.push(e));
  const running = worker.run();
  const [doneA, doneB] = await Promise.all([
    h.emu.waitForSession(a.sessionId, { timeoutMs: 150_000 }),
    h.emu.waitForSession(b.sessionId, { timeoutMs: 150_000 }),
  ]);
  // Both items have ended (their sandboxes and cgroups are gone) once the worker is idle.
  await worker.onIdle();
  const workerAlive = !worker.closing && worker.lastPollOkAt !== undefined;
  const metrics = worker.metrics();
  await worker.close();
  await running;
  const parentsLeft = parentCgroups(h.stateDir);
  const texts = Object.fromEntries(order.map((k, i) => [k, doneA.toolResults[i]?.text ?? ''])) as Record<Attack, string>;
  return {
    h,
    texts,
    statusA: doneA.status,
    statusB: doneB.status,
    bResults: doneB.toolResults.map((r) => r.text),
    storeB: h.emu.memories(storeB.id),
    hits,
    metrics,
    leaseRefusals: h.emu.requests.filter((r) => r.status === 412).length,
    workerAlive,
    sessionA: a.sessionId,
    log: h.capture.raw.join('\n'),
    parentsLeft,
  };
}

/** The `maw-<key>` cgroups of this state folder anywhere in the hierarchy. */
function parentCgroups(stateDir: string): string[] {
  const name = cgroupParentName(stateDir);
  const found: string[] = [];
  const walk = (dir: string, depth: number): void => {
    if (depth > 6) return;
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      // Removed while walked: another test's worker closed and took its own parent away.
      return;
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      const p = path.join(dir, e.name);
      if (e.name === name) found.push(p);
      else walk(p, depth + 1);
    }
  };
  walk('/sys/fs/cgroup', 0);
  return found;
}

/** The session cgroups of this worker's state folder still present. */
function sessionCgroupsLeft(stateDir: string): string[] {
  return parentCgroups(stateDir).flatMap((p) =>
    fs
      .readdirSync(p, { withFileTypes: true })
      .filter((c) => c.isDirectory())
      .map((c) => path.join(p, c.name)),
  );
}

function expectBServedUnharmed(run: Run): void {
  expect(run.statusB).toBe('terminated');
  expect(run.storeB).toEqual({ '/b.md': 'B edited under load' });
  const echoes = run.bResults.filter((t) => /^b-call-\d\nexit=0$/.test(t.trim()));
  expect(echoes).toHaveLength(10);
  expect(run.leaseRefusals).toBe(0);
  expect(run.workerAlive).toBe(true);
}

describe('one session cannot starve the other', () => {
  it('with small limits, A hits each limit, is told so and goes on; B is served; the events and metrics count it', async () => {
    expect(pidsBounded).toBe(true);
    const run = await runTenants({ memoryMiB: 256, maxProcesses: 128, tmpMiB: 64 }, WITH_BASH_BOMB);
    const { texts } = run;
    console.log('small limits:', JSON.stringify(texts, null, 1), run.metrics);
    expect(texts.busy).toContain('busy-done');
    expect(texts.allocate).not.toContain('allocated 1024 MiB');
    expect(texts.allocate).toContain('the sandbox reached its memory limit of 256 MiB; the command was killed');
    expect(texts.fillTmp).toMatch(/fill-exit=1/);
    expect(texts.fillTmp).toContain('/tmp in the sandbox is full (its limit is 64 MiB)');
    expect(texts.forkBomb).not.toContain('started 200');
    expect(texts.forkBomb).toContain('the sandbox reached its limit of 128 processes');
    expect(texts.bashBomb).toContain('the sandbox reached its limit of 128 processes');
    // The sandbox restarted after the fork bomb and serves the next call.
    expect(texts.after).toMatch(/^still-serving\nexit=0$/);
    expect(run.statusA).toBe('terminated');
    const limitsHit = new Set(run.hits.filter((e) => e.sessionId === run.sessionA).map((e) => e.limit));
    expect([...limitsHit].sort()).toEqual(['memory', 'processes', 'tmp']);
    expect(run.metrics.sandboxMemoryLimitHits).toBeGreaterThanOrEqual(1);
    expect(run.metrics.sandboxProcessLimitHits).toBeGreaterThanOrEqual(1);
    expect(run.metrics.sandboxTmpFull).toBeGreaterThanOrEqual(1);
    expect(run.log).toContain('the sandbox reached its memory limit of 256 MiB');
    expectBServedUnharmed(run);
    expect(sessionCgroupsLeft(run.h.stateDir)).toEqual([]);
    // The worker removed its parent cgroups when it closed.
    expect(run.parentsLeft).toEqual([]);
  }, 240_000);

  it('with the default limits, the same work fits: nothing is refused or killed', async () => {
    const run = await runTenants(undefined);
    const { texts } = run;
    console.log('default limits:', JSON.stringify(texts, null, 1));
    expect(texts.allocate).toContain('allocated 1024 MiB');
    expect(texts.fillTmp).toMatch(/fill-exit=0\n100\n/);
    expect(texts.forkBomb).toContain('started 200');
    expect(run.hits).toEqual([]);
    expectBServedUnharmed(run);
    expect(sessionCgroupsLeft(run.h.stateDir)).toEqual([]);
    // The worker removed its parent cgroups when it closed.
    expect(run.parentsLeft).toEqual([]);
  }, 240_000);

  it('with limits: null, the same attacks succeed (the damage the limits prevent)', async () => {
    const run = await runTenants(null);
    const { texts } = run;
    console.log('no limits:', JSON.stringify(texts, null, 1), run.metrics);
    expect(texts.allocate).toContain('allocated 1024 MiB');
    expect(texts.fillTmp).toMatch(/fill-exit=0\n100\n/);
    expect(texts.forkBomb).toContain('started 200');
    expect(run.hits).toEqual([]);
    expectBServedUnharmed(run);
  }, 240_000);
});
