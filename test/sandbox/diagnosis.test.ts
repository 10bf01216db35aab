// The cause of a sandbox that does not start, named from bubblewrap's words and the host's facts,
// with the fix in the words of where the worker runs; and the limits held where no cgroup is.
import { describe, expect, it } from 'vitest';
import { diagnoseSandboxFailure, type SandboxHostFacts } from '../../src/sandbox/diagnosis.js';
import { cgroupFallbacks, countsProcessesPerNamespace, niceForWeight } from '../../src/sandbox/limits/without-cgroup.js';
import { SANDBOX_LIMITS_DEFAULT } from '../../src/sandbox/limits/limits.js';

const host: SandboxHostFacts = {
  container: undefined,
  workerSeccomp: false,
  unprivilegedUsernsClone: undefined,
  maxUserNamespaces: 15_000,
  apparmorRestrictsUserns: undefined,
};
const pod: SandboxHostFacts = { ...host, container: 'kubernetes', workerSeccomp: true };
const docker: SandboxHostFacts = { ...host, container: 'container', workerSeccomp: true };

const PROC = "the tool host ended (exit code 1): bwrap: Can't mount proc on /newroot/proc: Operation not permitted";
const NO_NS = 'the tool host ended (exit code 1): bwrap: Creating new namespace failed: Operation not permitted';
const NO_PERM =
  "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces. On e.g. debian this can be enabled with 'sysctl kernel.unprivileged_userns_clone=1'.";
const UID_MAP = 'bwrap: setting up uid map: Permission denied';
const SLAVE = 'bwrap: Failed to make / slave: Operation not permitted';

describe('diagnoseSandboxFailure', () => {
  it.each([
    {
      what: 'a masked /proc in a pod',
      problem: PROC,
      facts: pod,
      reason: 'proc_masked',
      fix: ['hostUsers: false', 'procMount: Unmasked', '1.33'],
    },
    {
      what: 'a masked /proc under docker or podman',
      problem: PROC,
      facts: docker,
      reason: 'proc_masked',
      fix: ['unmask=ALL', 'systempaths=unconfined', 'procMount: Unmasked'],
    },
    {
      what: 'seccomp refusing namespaces in a pod',
      problem: NO_PERM,
      facts: pod,
      reason: 'seccomp',
      fix: ['seccompProfile', 'Localhost', 'seccomp-bubblewrap.json'],
    },
    {
      what: 'seccomp refusing namespaces under docker',
      problem: NO_NS,
      facts: docker,
      reason: 'seccomp',
      fix: ['--security-opt seccomp=', 'seccomp-bubblewrap.json', 'seccompProfile'],
    },
    { what: 'seccomp refusing mount under docker', problem: SLAVE, facts: docker, reason: 'seccomp', fix: ['seccomp-bubblewrap.json'] },
    {
      what: 'AppArmor refusing mount in a pod without seccomp',
      problem: SLAVE,
      facts: { ...pod, workerSeccomp: false },
      reason: 'apparmor',
      fix: ['appArmorProfile'],
    },
    {
      what: 'user namespaces off (max 0)',
      problem: NO_NS,
      facts: { ...host, maxUserNamespaces: 0 },
      reason: 'userns_disabled',
      fix: ['user.max_user_namespaces'],
    },
    {
      what: "Debian's switch off",
      problem: NO_PERM,
      facts: { ...host, unprivilegedUsernsClone: 0 },
      reason: 'userns_disabled',
      fix: ['kernel.unprivileged_userns_clone=1'],
    },
    {
      what: "user namespaces off on a pod's node",
      problem: NO_PERM,
      facts: { ...pod, maxUserNamespaces: 0 },
      reason: 'userns_disabled',
      fix: ['of the node'],
    },
    {
      what: "Ubuntu's AppArmor restriction",
      problem: UID_MAP,
      facts: { ...host, apparmorRestrictsUserns: 1 },
      reason: 'apparmor',
      fix: ['apparmor_restrict_unprivileged_userns=0', 'userns'],
    },
    { what: 'no uid map on a bare host', problem: UID_MAP, facts: host, reason: 'uid_map', fix: ['uid map'] },
    {
      what: 'no uid map in a pod',
      problem: UID_MAP,
      facts: { ...pod, workerSeccomp: false },
      reason: 'uid_map',
      fix: ['hostUsers: false'],
    },
    {
      what: 'namespaces refused on a bare host',
      problem: NO_NS,
      facts: host,
      reason: 'userns_disabled',
      fix: ['user.max_user_namespaces'],
    },
    { what: 'anything else', problem: 'bwrap: execvp /x: No such file or directory', facts: host, reason: 'probe_failed', fix: ['doctor'] },
  ])('$what: $reason', ({ problem, facts, reason, fix }) => {
    const d = diagnoseSandboxFailure(problem, facts);
    expect(d.reason).toBe(reason);
    for (const words of fix) expect(d.fix).toContain(words);
    // bubblewrap's own words stay in the problem, and the page of the documentation is named.
    expect(d.problem).toContain(problem);
    expect(d.fix).toContain('docs/containers.md');
  });
});

describe('limits without a cgroup', () => {
  const all = ['memoryMiB', 'maxProcesses', 'cpuWeight'] as const;
  it.each([
    {
      what: 'a pod on a current kernel (uid 10001)',
      facts: { kernelRelease: '6.8.0-45-generic', hostUid: 10_001, nice: '/usr/bin/nice' },
      processes: 1024,
      nice: 3,
      notHeld: ['memoryMiB'],
    },
    {
      what: "a user namespace's root (host uid 200000)",
      facts: { kernelRelease: '5.15.0', hostUid: 200_000, nice: '/usr/bin/nice' },
      processes: 1024,
      nice: 3,
      notHeld: ['memoryMiB'],
    },
    {
      what: "the host's root: exempt from RLIMIT_NPROC",
      facts: { kernelRelease: '6.1.0', hostUid: 0, nice: '/usr/bin/nice' },
      processes: undefined,
      nice: 3,
      notHeld: ['memoryMiB', 'maxProcesses'],
    },
    {
      what: 'a kernel before 5.14: counted per user, not per sandbox',
      facts: { kernelRelease: '5.10.0-28-amd64', hostUid: 1000, nice: undefined },
      processes: undefined,
      nice: undefined,
      notHeld: ['memoryMiB', 'maxProcesses', 'cpuWeight'],
    },
  ])('$what', ({ facts, processes, nice, notHeld }) => {
    const f = cgroupFallbacks(SANDBOX_LIMITS_DEFAULT, all, facts);
    expect(f.processes).toBe(processes);
    expect(f.nice?.level).toBe(nice);
    expect(Object.keys(f.notHeld).sort()).toEqual([...notHeld].sort());
  });

  it('only the limits no cgroup holds fall back, and an unbounded one needs nothing', () => {
    const f = cgroupFallbacks({ ...SANDBOX_LIMITS_DEFAULT, cpuWeight: null }, ['maxProcesses', 'cpuWeight'], {
      kernelRelease: '6.1',
      hostUid: 5,
      nice: '/bin/nice',
    });
    expect(f).toEqual({ processes: 1024, notHeld: {} });
  });

  it.each([
    [50, 3],
    [100, 0],
    [400, 0],
    [25, 6],
    [1, 19],
  ])('cpuWeight %i is niceness %i', (weight, level) => {
    expect(niceForWeight(weight)).toBe(level);
  });

  it.each([
    ['5.14.0', true],
    ['6.18.44-fc', true],
    ['5.13.19', false],
    ['4.19.0', false],
    ['garbage', false],
  ])('kernel %s counts RLIMIT_NPROC per user namespace: %s', (release, yes) => {
    expect(countsProcessesPerNamespace(release)).toBe(yes);
  });
});
