// The sandboxes' cgroups. On cgroup v2 (a fake cgroupfs in a temp folder standing in for a
// delegated subtree): the worker's processes move into `worker/`, the controllers are handed down,
// the parent gets the sandboxes' CPU weight and each session's leaf its memory, OOM-group, pids and
// weight before any process enters; the counters are read from memory.events and pids.events; the
// kill ends the processes listed in cgroup.procs. On this host's real hierarchy (cgroup v1 as root;
// skipped elsewhere): the spawn wrapper puts a process in the session's cgroup with its OOM score
// and rlimits, and a cgroup left by a worker that is gone (killed -9) is killed and removed by the
// sweep the next start and `recover` run, while a live worker's is left alone.
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cgroupParentName, probeCgroupSupport, setUpSandboxCgroups, type CgroupSupport } from '../../src/sandbox/limits/cgroup-host.js';
import { releaseSandboxCgroups, sweepSandboxCgroups } from '../../src/sandbox/limits/cgroup-sweep.js';
import { emptyPollMs, SessionCgroup } from '../../src/sandbox/limits/session-cgroup.js';
import { resolveSandboxLimits, SANDBOX_LIMITS_DEFAULT } from '../../src/sandbox/limits/limits.js';
import { describeEnforcement } from '../../src/sandbox/limits/session-limits.js';
import { SANDBOX_OOM_SCORE_ADJ, spawnWrapped, wrapperArguments } from '../../src/sandbox/launcher.js';
import type { FallbackFacts } from '../../src/sandbox/limits/without-cgroup.js';

/** A host where nothing stands in for a missing cgroup controller. */
const NO_FALLBACKS: FallbackFacts = { kernelRelease: '5.10.0', hostUid: 0, nice: undefined };

const small = resolveSandboxLimits({ memoryMiB: 256, maxProcesses: 128, tmpMiB: 64 });
const temps: string[] = [];
const children: Array<ReturnType<typeof spawn>> = [];

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const t of temps.splice(0)) fs.rmSync(t, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  temps.push(d);
  return d;
}

/** A cgroup v2 mount with the worker's cgroup `/svc` holding `pids`. */
function fakeV2(opts: { controllers?: string; pids?: string } = {}): { root: string; own: string } {
  const root = tempDir('maw-fake-cgroup2-');
  fs.writeFileSync(path.join(root, 'cgroup.controllers'), 'cpuset cpu io memory hugetlb pids rdma misc\n');
  const own = path.join(root, 'svc');
  fs.mkdirSync(own);
  fs.writeFileSync(path.join(own, 'cgroup.controllers'), opts.controllers ?? 'cpuset cpu io memory pids\n');
  fs.writeFileSync(path.join(own, 'cgroup.subtree_control'), '');
  fs.writeFileSync(path.join(own, 'cgroup.procs'), opts.pids ?? '4321\n');
  return { root, own };
}

const read = (p: string): string => fs.readFileSync(p, 'utf8');

describe('on cgroup v2 with a delegated subtree', () => {
  it('moves the worker into worker/, hands the controllers down and weighs the sandboxes below the worker', () => {
    const { root, own } = fakeV2();
    const support = setUpSandboxCgroups(small, '/var/state/w1', { root, selfCgroup: '0::/svc\n', isRoot: false });
    const parent = path.join(own, cgroupParentName('/var/state/w1'));
    expect(support).toEqual({ kind: 'v2', root, parents: { memory: parent, pids: parent, cpu: parent } });
    expect(read(path.join(own, 'worker', 'cgroup.procs'))).toBe('4321');
    expect(read(path.join(own, 'cgroup.subtree_control'))).toBe('+memory +pids +cpu');
    expect(read(path.join(parent, 'cgroup.subtree_control'))).toBe('+memory +pids +cpu');
    expect(read(path.join(parent, 'cpu.weight'))).toBe('50');
  });

  it("in the host's root cgroup (no cgroup.type), no process is moved; in a container's namespace root, they are", () => {
    const root = tempDir('maw-fake-cgroup2-');
    fs.writeFileSync(path.join(root, 'cgroup.controllers'), 'cpu memory pids\n');
    fs.writeFileSync(path.join(root, 'cgroup.subtree_control'), '');
    fs.writeFileSync(path.join(root, 'cgroup.procs'), '1\n');
    expect(setUpSandboxCgroups(small, '/var/state/w1', { root, selfCgroup: '0::/\n' }).kind).toBe('v2');
    expect(fs.existsSync(path.join(root, 'worker'))).toBe(false);
    fs.writeFileSync(path.join(root, 'cgroup.subtree_control'), '');
    fs.writeFileSync(path.join(root, 'cgroup.type'), 'domain\n');
    setUpSandboxCgroups(small, '/var/state/w1', { root, selfCgroup: '0::/\n' });
    expect(read(path.join(root, 'worker', 'cgroup.procs'))).toBe('1');
  });

  it("writes a session's limits into its leaf before anything enters, and reads its counters", () => {
    const { root } = fakeV2();
    const support = setUpSandboxCgroups(small, '/var/state/w1', { root, selfCgroup: '0::/svc\n' }) as Exclude<
      CgroupSupport,
      { kind: 'none' }
    >;
    const cg = SessionCgroup.create(support, 'sesn_01/..x', small, 777);
    const leaf = path.join(support.parents.memory!, '777-sesn_01___x');
    expect(cg.dirs).toEqual([leaf]);
    expect(cg.procsFiles).toEqual([path.join(leaf, 'cgroup.procs')]);
    expect(cg.entries).toEqual([{ file: path.join(leaf, 'cgroup.procs'), moves: 'process' }]);
    // The cgroup file reaches the wrapper as an argument, never inside its script.
    expect(wrapperArguments({ cgroupEntries: cg.entries, openFiles: null, nice: null }, 4)).toEqual([
      '4',
      '-',
      '-',
      '-',
      '1',
      'process',
      path.join(leaf, 'cgroup.procs'),
    ]);
    expect(read(path.join(leaf, 'memory.max'))).toBe(String(256 * 1024 * 1024));
    expect(read(path.join(leaf, 'memory.swap.max'))).toBe('0');
    expect(read(path.join(leaf, 'memory.oom.group'))).toBe('1');
    expect(read(path.join(leaf, 'pids.max'))).toBe('128');
    expect(read(path.join(leaf, 'cpu.weight'))).toBe('100');
    expect(cg.counters()).toEqual({ oomKills: 0, pidsRefused: 0 });
    fs.writeFileSync(path.join(leaf, 'memory.events'), 'low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\noom_group_kill 1\n');
    fs.writeFileSync(path.join(leaf, 'pids.events'), 'max 17\n');
    expect(cg.counters()).toEqual({ oomKills: 2, pidsRefused: 17 });
  });

  it('destroy writes cgroup.kill, kills every process listed in cgroup.procs and removes the leaf', async () => {
    const { root } = fakeV2();
    const support = setUpSandboxCgroups(small, '/var/state/w1', { root, selfCgroup: '0::/svc\n' }) as Exclude<
      CgroupSupport,
      { kind: 'none' }
    >;
    const cg = SessionCgroup.create(support, 'sesn_kill', small);
    const sleeper = spawn('sleep', ['60'], { stdio: 'ignore' });
    children.push(sleeper);
    const ended = new Promise<string | null>((resolve) => sleeper.once('exit', (_c, signal) => resolve(signal)));
    fs.writeFileSync(cg.procsFiles[0]!, `${sleeper.pid}\n`);
    const writes: string[] = [];
    const watcher = fs.watch(cg.dirs[0]!, (_e, f) => f && writes.push(String(f)));
    await cg.destroy();
    watcher.close();
    expect(await ended).toBe('SIGKILL');
    expect(writes).toContain('cgroup.kill');
    expect(fs.existsSync(cg.dirs[0]!)).toBe(false);
  });

  it('a cgroup that is emptying is looked at again after 1 ms, then after twice as long each time, at most every 20 ms', () => {
    const table: Array<[looks: number, ms: number]> = [
      [0, 1],
      [1, 1],
      [2, 2],
      [3, 4],
      [4, 8],
      [5, 16],
      [6, 20],
      [7, 20],
      [1000, 20],
    ];
    for (const [looks, ms] of table) expect([looks, emptyPollMs(looks)]).toEqual([looks, ms]);
  });

  it('a cgroup without the memory controller enforces the rest and names memoryMiB as not enforced', () => {
    const { root } = fakeV2({ controllers: 'cpu pids\n' });
    const support = setUpSandboxCgroups(small, '/var/state/w1', { root, selfCgroup: '0::/svc\n' });
    expect(support.kind).toBe('v2');
    const described = describeEnforcement(small, support, NO_FALLBACKS);
    expect(described.unenforced).toEqual(['memoryMiB']);
    expect(described.problem).toContain('memory controller is not available');
    expect(described.fix).toContain('Delegate=yes');
  });

  it('no limit needing a cgroup makes none, and limits: null needs none', () => {
    const { root, own } = fakeV2();
    const support = setUpSandboxCgroups(resolveSandboxLimits(null), '/var/state/w1', { root, selfCgroup: '0::/svc\n' });
    expect(support.kind).toBe('none');
    expect(fs.readdirSync(own).sort()).toEqual(['cgroup.controllers', 'cgroup.procs', 'cgroup.subtree_control']);
  });

  it('the sweep removes the session cgroups of dead workers only', async () => {
    const { root } = fakeV2();
    const support = setUpSandboxCgroups(small, '/var/state/w1', { root, selfCgroup: '0::/svc\n' }) as Exclude<
      CgroupSupport,
      { kind: 'none' }
    >;
    const dead = SessionCgroup.create(support, 'sesn_dead', small, 999_999_999);
    const live = SessionCgroup.create(support, 'sesn_live', small, 1);
    const mine = SessionCgroup.create(support, 'sesn_mine', small);
    const other = SessionCgroup.create(
      setUpSandboxCgroups(small, '/var/state/other', { root, selfCgroup: '0::/svc\n' }) as Exclude<CgroupSupport, { kind: 'none' }>,
      'sesn_other',
      small,
      999_999_998,
    );
    const removed = await sweepSandboxCgroups('/var/state/w1', { root });
    expect(removed).toEqual(dead.dirs);
    for (const kept of [live, mine, other]) expect(fs.existsSync(kept.dirs[0]!)).toBe(true);
  });

  it("the sweep finds a dead worker's leftovers deep in a wide hierarchy (more folders per level than it reads at once)", async () => {
    const { root } = fakeV2();
    // 100 sibling folders on each of three levels above the one that holds the leftover parent.
    let deep = root;
    for (const level of ['a', 'b', 'c']) {
      for (let i = 0; i < 100; i++) fs.mkdirSync(path.join(deep, `${level}${i}`));
      deep = path.join(deep, `${level}99`);
    }
    fs.writeFileSync(path.join(deep, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
    fs.writeFileSync(path.join(deep, 'cgroup.subtree_control'), '');
    fs.writeFileSync(path.join(deep, 'cgroup.procs'), '');
    const rel = path.relative(root, deep);
    const support = setUpSandboxCgroups(small, '/var/state/w1', { root, selfCgroup: `0::/${rel}\n`, isRoot: false }) as Exclude<
      CgroupSupport,
      { kind: 'none' }
    >;
    const dead = SessionCgroup.create(support, 'sesn_dead', small, 999_999_999);
    expect(dead.dirs[0]!.startsWith(deep)).toBe(true);
    const removed = await sweepSandboxCgroups('/var/state/w1', { root });
    expect(removed).toEqual(dead.dirs);
    expect(fs.existsSync(dead.dirs[0]!)).toBe(false);
  });

  it("the worker's stop removes its parent once no session cgroup is left in it", async () => {
    const { root, own } = fakeV2();
    const support = setUpSandboxCgroups(small, '/var/state/w1', { root, selfCgroup: '0::/svc\n' }) as Exclude<
      CgroupSupport,
      { kind: 'none' }
    >;
    const parent = path.join(own, cgroupParentName('/var/state/w1'));
    const cg = SessionCgroup.create(support, 'sesn_open', small);
    expect(releaseSandboxCgroups(support)).toEqual([]);
    expect(fs.existsSync(cg.dirs[0]!)).toBe(true);
    await cg.destroy();
    expect(releaseSandboxCgroups(support)).toEqual([parent]);
    expect(fs.existsSync(parent)).toBe(false);
    expect(fs.existsSync(path.join(own, 'worker'))).toBe(true);
    expect(releaseSandboxCgroups(support)).toEqual([]);
    expect(releaseSandboxCgroups({ kind: 'none', problem: '', fix: '' })).toEqual([]);
  });

  it('probes without writing: which controllers a delegated cgroup offers', () => {
    const { root, own } = fakeV2({ controllers: 'memory pids\n' });
    expect(probeCgroupSupport({ root, selfCgroup: '0::/svc\n' })).toEqual({ kind: 'v2', controllers: ['memory', 'pids'] });
    expect(fs.readdirSync(own)).not.toContain('worker');
  });
});

describe('on cgroup v1 without root', () => {
  it('nothing is made, and each cgroup limit is named with the fix', () => {
    const root = tempDir('maw-fake-cgroup1-');
    for (const c of ['memory', 'pids', 'cpu']) fs.mkdirSync(path.join(root, c));
    const support = setUpSandboxCgroups(SANDBOX_LIMITS_DEFAULT, '/var/state/w1', {
      root,
      selfCgroup: '4:memory:/\n3:pids:/\n2:cpu,cpuacct:/\n',
      isRoot: false,
    });
    expect(support).toMatchObject({ kind: 'none', problem: expect.stringContaining('only root') });
    expect(describeEnforcement(SANDBOX_LIMITS_DEFAULT, support, NO_FALLBACKS).unenforced).toEqual([
      'memoryMiB',
      'maxProcesses',
      'cpuWeight',
    ]);
    expect(fs.readdirSync(path.join(root, 'memory'))).toEqual([]);
  });
});

const realV1 =
  process.getuid?.() === 0 &&
  fs.existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes') &&
  !fs.existsSync('/sys/fs/cgroup/cgroup.controllers');

describe.runIf(realV1)("on this host's cgroup v1 hierarchy, as root", () => {
  let stateDir: string;
  afterEach(async () => {
    await sweepSandboxCgroups(stateDir, { alive: () => false });
    for (const c of ['memory', 'pids', 'cpu']) {
      const own = /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(.*)$/m.exec(fs.readFileSync('/proc/self/cgroup', 'utf8'))?.[1] ?? '/';
      for (const p of [
        path.join('/sys/fs/cgroup', c, cgroupParentName(stateDir)),
        path.join('/sys/fs/cgroup', c, own, cgroupParentName(stateDir)),
      ]) {
        try {
          fs.rmdirSync(p);
        } catch {
          // Not made in this hierarchy.
        }
      }
    }
  });

  it("the wrapper puts the sandbox's process in the session cgroup with its OOM score and rlimits; a crashed worker's cgroup is swept", async () => {
    stateDir = tempDir('maw-state-');
    const support = setUpSandboxCgroups(small, stateDir);
    expect(support.kind).toBe('v1');
    if (support.kind === 'none') return;
    // The worker that made this cgroup was killed -9: its pid names no live process.
    const gone = spawnSync('true').pid!;
    const cg = SessionCgroup.create(support, 'sesn_crashed', small, gone);
    expect(cg.dirs).toHaveLength(3);
    expect(read(path.join(support.parents.memory!, `${gone}-sesn_crashed`, 'memory.limit_in_bytes')).trim()).toBe(
      String(256 * 1024 * 1024),
    );
    expect(read(path.join(support.parents.pids!, `${gone}-sesn_crashed`, 'pids.max')).trim()).toBe('128');
    // The shell moves itself (its only thread) through each hierarchy's tasks file.
    expect(cg.entries).toEqual(cg.dirs.map((d) => ({ file: path.join(d, 'tasks'), moves: 'self' })));
    const child = spawnWrapped('/bin/sleep', ['300'], { cgroupEntries: cg.entries, openFiles: 512, nice: null }, [
      'ignore',
      'ignore',
      'ignore',
    ]);
    children.push(child);
    const ended = new Promise<string | null>((resolve) => child.once('exit', (_c, signal) => resolve(signal)));
    await new Promise((r) => setTimeout(r, 300));
    expect(fs.readFileSync(`/proc/${child.pid}/comm`, 'utf8').trim()).toBe('sleep');
    const membership = fs.readFileSync(`/proc/${child.pid}/cgroup`, 'utf8');
    for (const c of ['memory', 'pids', 'cpu'])
      expect(membership).toMatch(new RegExp(`:${c}[:,].*/${gone}-sesn_crashed$|:${c}:.*/${gone}-sesn_crashed$`, 'm'));
    expect(fs.readFileSync(`/proc/${child.pid}/oom_score_adj`, 'utf8').trim()).toBe(String(SANDBOX_OOM_SCORE_ADJ));
    const limits = fs.readFileSync(`/proc/${child.pid}/limits`, 'utf8');
    expect(limits).toMatch(/Max open files\s+512\s+512/);
    expect(limits).toMatch(/Max core file size\s+0\s+0/);
    // A live worker's cgroup is left alone.
    const live = SessionCgroup.create(support, 'sesn_live', small, 1);
    const removed = await sweepSandboxCgroups(stateDir);
    expect(removed.sort()).toEqual(cg.dirs.sort());
    expect(await ended).toBe('SIGKILL');
    for (const d of cg.dirs) expect(fs.existsSync(d)).toBe(false);
    for (const d of live.dirs) expect(fs.existsSync(d)).toBe(true);
    // The worker's stop: its parents go once the last session's cgroup is gone, in every hierarchy.
    const parents = [...new Set(Object.values(support.parents))];
    expect(parents).toHaveLength(3);
    expect(releaseSandboxCgroups(support)).toEqual([]);
    await live.destroy();
    for (const d of live.dirs) expect(fs.existsSync(d)).toBe(false);
    expect(releaseSandboxCgroups(support).sort()).toEqual(parents.sort());
    for (const p of parents) expect(fs.existsSync(p)).toBe(false);
  }, 30_000);
});
