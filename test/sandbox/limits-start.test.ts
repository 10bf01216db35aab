// A sandbox's start runs at the worker's CPU weight. While at least one sandbox of a worker starts,
// the sandboxes' parent weighs as much as the worker (never more) and each starting session's
// cgroup outweighs its running siblings; once the last start is over, the configured weights are
// back. Checked as a table on the pure weight, with fake writers for overlapping starts, and on a
// fake cgroup v2 folder (a delegated subtree) through the session's limits, including the parent a
// crashed worker left raised, which the next start writes back.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { cgroupParentName } from '../../src/sandbox/limits/cgroup-host.js';
import { resolveSandboxLimits } from '../../src/sandbox/limits/limits.js';
import { prepareSandboxLimits, SessionLimits } from '../../src/sandbox/limits/session-limits.js';
import {
  RUNNING_SESSION_WEIGHT,
  SandboxStarts,
  sandboxesCpuWeight,
  STARTING_SESSION_WEIGHT,
} from '../../src/sandbox/limits/start-weight.js';

const log = pino({ level: 'silent' });
const temps: string[] = [];
afterEach(() => {
  for (const t of temps.splice(0)) fs.rmSync(t, { recursive: true, force: true });
});

describe("the sandboxes' parent weight", () => {
  it.each([
    [50, 0, 50],
    [50, 1, 100],
    [50, 3, 100],
    [1, 1, 100],
    [100, 1, 100],
    // Set above the worker's by the operator: a start never lowers it.
    [400, 1, 400],
    [400, 0, 400],
  ])('cpuWeight %i with %i starting weighs %i', (cpuWeight, starting, expected) => {
    expect(sandboxesCpuWeight(cpuWeight, starting)).toBe(expected);
  });
});

describe('overlapping starts', () => {
  it('raise the parent at the first start, lower it after the last end, and weigh each session while it starts', () => {
    const parent: number[] = [];
    const a: number[] = [];
    const b: number[] = [];
    const starts = new SandboxStarts(
      50,
      (w) => parent.push(w),
      (e) => {
        throw e;
      },
    );
    const endA = starts.begin((w) => a.push(w));
    expect(parent).toEqual([100]);
    expect(a).toEqual([STARTING_SESSION_WEIGHT]);
    const endB = starts.begin((w) => b.push(w));
    expect(starts.starting).toBe(2);
    expect(parent).toEqual([100]);
    endA();
    expect(a).toEqual([STARTING_SESSION_WEIGHT, RUNNING_SESSION_WEIGHT]);
    expect(parent).toEqual([100]);
    endA();
    expect(starts.starting).toBe(1);
    endB();
    expect(parent).toEqual([100, 50]);
    expect(b).toEqual([STARTING_SESSION_WEIGHT, RUNNING_SESSION_WEIGHT]);
    endB();
    expect(starts.starting).toBe(0);
    expect(parent).toEqual([100, 50]);
  });

  it('a refused write is reported and the count stays right', () => {
    const errors: unknown[] = [];
    const parent: number[] = [];
    const starts = new SandboxStarts(
      50,
      (w) => parent.push(w),
      (e) => errors.push(e),
    );
    const end = starts.begin(() => {
      throw new Error('EACCES');
    });
    end();
    expect(errors).toHaveLength(2);
    expect(parent).toEqual([100, 50]);
    expect(starts.starting).toBe(0);
  });
});

describe('on a fake cgroup v2 subtree, through the session limits', () => {
  function fakeV2(): { root: string; own: string; stateDir: string } {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'maw-fake-cgroup2-'));
    temps.push(root);
    fs.writeFileSync(path.join(root, 'cgroup.controllers'), 'cpu memory pids\n');
    const own = path.join(root, 'svc');
    fs.mkdirSync(own);
    fs.writeFileSync(path.join(own, 'cgroup.controllers'), 'cpu memory pids\n');
    fs.writeFileSync(path.join(own, 'cgroup.subtree_control'), '');
    fs.writeFileSync(path.join(own, 'cgroup.procs'), '4321\n');
    return { root, own, stateDir: path.join(root, 'state') };
  }
  const read = (p: string): string => fs.readFileSync(p, 'utf8');

  it("a session's start raises its leaf and the parent, and its end puts them back", async () => {
    const { root, own, stateDir } = fakeV2();
    const facts = { root, selfCgroup: '0::/svc\n', pid: 555 };
    const parent = path.join(own, cgroupParentName(stateDir));
    // The weight a crashed worker left raised mid-start is written back at the next start.
    fs.mkdirSync(parent);
    fs.writeFileSync(path.join(parent, 'cpu.weight'), '100');
    const runtime = await prepareSandboxLimits(resolveSandboxLimits({}), { stateDir, log, facts });
    expect(read(path.join(parent, 'cpu.weight'))).toBe('50');
    expect(runtime.starts).toBeDefined();
    const a = new SessionLimits(runtime, 'sesn_a', log);
    const b = new SessionLimits(runtime, 'sesn_b', log);
    const leafA = path.join(a.cgroupDirs[0]!, 'cpu.weight');
    const leafB = path.join(b.cgroupDirs[0]!, 'cpu.weight');
    expect(read(leafA)).toBe('100');
    const endA = a.sandboxStarting();
    expect(read(leafA)).toBe('10000');
    expect(read(parent + '/cpu.weight')).toBe('100');
    const endB = b.sandboxStarting();
    expect(read(leafB)).toBe('10000');
    endA();
    expect(read(leafA)).toBe('100');
    expect(read(parent + '/cpu.weight')).toBe('100');
    endB();
    expect(read(leafB)).toBe('100');
    expect(read(parent + '/cpu.weight')).toBe('50');
    await a.close();
    await b.close();
  });

  it('without a CPU weight (cpuWeight: null) a start writes no weight', async () => {
    const { root, own, stateDir } = fakeV2();
    const runtime = await prepareSandboxLimits(resolveSandboxLimits({ cpuWeight: null }), {
      stateDir,
      log,
      facts: { root, selfCgroup: '0::/svc\n', pid: 556 },
    });
    expect(runtime.starts).toBeUndefined();
    const s = new SessionLimits(runtime, 'sesn_c', log);
    s.sandboxStarting()();
    const parent = path.join(own, cgroupParentName(stateDir));
    expect(fs.existsSync(path.join(parent, 'cpu.weight'))).toBe(false);
    expect(fs.existsSync(path.join(s.cgroupDirs[0]!, 'cpu.weight'))).toBe(false);
    await s.close();
  });
});
