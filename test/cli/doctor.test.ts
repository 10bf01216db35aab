// Pins `managed-agents-worker doctor`: each host fact maps to pass/warn/fail with a fix, the exit
// code is 5 only when a check fails, no credential is ever printed, and a real run in a temp
// folder passes on this (POSIX) machine.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CGROUP_FIX } from '../../src/sandbox/limits/cgroup-host.js';
import { BWRAP_INSTALL_FIX } from '../../src/sandbox/probe.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  allPassed,
  apiFix,
  checkBash,
  checkSandbox,
  checkSeccomp,
  checkUserNamespace,
  checkSandboxLimits,
  checkClock,
  checkEnv,
  checkMountParent,
  checkNode,
  checkPosix,
  runChecks,
  type DoctorProbes,
  type SandboxKernelCheckInput,
} from '../../src/cli/doctor/checks.js';
import { doctorCommand } from '../../src/cli/doctor/command.js';
import { EXIT } from '../../src/cli/exit-codes.js';
import { runCli } from '../../src/cli/cli.js';
import type { Command } from '../../src/cli/command.js';
import type { CliIo } from '../../src/cli/io.js';

function captureIo(env: NodeJS.ProcessEnv = {}): CliIo & { out: string; err: string } {
  const io = {
    out: '',
    err: '',
    env,
    cwd: process.cwd(),
    stdout: (t: string) => void (io.out += t),
    stderr: (t: string) => void (io.err += t),
  };
  return io;
}

function runDoctor(command: Command, argv: string[], io: CliIo): Promise<number> {
  return runCli(['doctor', ...argv], io, [command]);
}

/** A probe sandbox with its own user namespace, nested ones refused, the filter installed. */
const hardened: SandboxKernelCheckInput = {
  ran: true,
  arch: 'x64',
  filterBuilt: true,
  seccompMode: 2,
  uidMap: '0 0 1',
  ownUserNamespace: true,
  disableUserns: true,
};

const healthy: DoctorProbes = {
  platform: () => 'linux',
  nodeVersion: () => 'v22.11.0',
  noFollow: async () => ({ ok: true, detail: 'refused (ELOOP)' }),
  dirState: async () => 'ok',
  caseSensitive: async () => true,
  isExecutable: async () => true,
  api: async () => ({ ok: true, latencyMs: 12, serverDate: new Date(1_700_000_000_000).toUTCString() }),
  nowMs: () => 1_700_000_000_000,
  sandbox: async () => ({ ok: true, bwrap: '/usr/bin/bwrap' }),
  sandboxKernel: async () => hardened,
  sandboxLimits: async () => ({ cgroup: 'v1', enforced: ['memoryMiB 4096'], unenforced: [], problem: '', fix: '' }),
};

describe('single checks', () => {
  const rows: Array<{ description: string; result: () => { status: string; fix: string }; status: string; fixIncludes?: string }> = [
    { description: 'linux is a POSIX host', result: () => checkPosix('linux'), status: 'pass' },
    { description: 'windows is refused with a pointer to WSL2', result: () => checkPosix('win32'), status: 'fail', fixIncludes: 'WSL2' },
    { description: 'a writable parent passes', result: () => checkMountParent('/mnt/memory', 'ok'), status: 'pass' },
    {
      description: 'a missing parent fails with the mkdir/chown fix',
      result: () => checkMountParent('/mnt/memory', 'missing'),
      status: 'fail',
      fixIncludes: 'sudo mkdir -p /mnt/memory',
    },
    {
      description: 'an unwritable parent fails with the chown fix',
      result: () => checkMountParent('/mnt/memory', 'not_writable'),
      status: 'fail',
      fixIncludes: 'chown',
    },
    {
      description: 'a file in place of the parent fails',
      result: () => checkMountParent('/mnt/memory', 'not_directory'),
      status: 'fail',
      fixIncludes: 'Remove it',
    },
    { description: 'a missing /bin/bash fails', result: () => checkBash(false), status: 'fail', fixIncludes: 'bash' },
    {
      description: 'no bubblewrap off Linux only warns (there is none to install)',
      result: () => checkSandbox({ ok: false, reason: 'platform', problem: 'Linux only', fix: 'run the worker in a Linux VM' }),
      status: 'warn',
      fixIncludes: "sandbox: 'none'",
    },
    {
      description: "a container's masked /proc fails and names the container's fix",
      result: () =>
        checkSandbox({
          ok: false,
          reason: 'proc_masked',
          problem: "a sandbox did not start (bwrap: Can't mount proc on /newroot/proc: Operation not permitted)",
          fix: 'give the pod its own user namespace and an unmasked /proc: spec.hostUsers: false and procMount: Unmasked',
        }),
      status: 'fail',
      fixIncludes: 'procMount: Unmasked',
    },
    { description: 'a working bubblewrap passes', result: () => checkSandbox({ ok: true, bwrap: '/usr/bin/bwrap' }), status: 'pass' },
    {
      description: 'a missing bubblewrap fails with the install line (a queue worker would refuse to start)',
      result: () => checkSandbox({ ok: false, reason: 'missing', problem: 'bubblewrap (bwrap) is not on PATH', fix: BWRAP_INSTALL_FIX }),
      status: 'fail',
      fixIncludes: 'apt-get install bubblewrap',
    },
    {
      description: 'a sandbox that does not start fails with its fix',
      result: () =>
        checkSandbox({
          ok: false,
          reason: 'probe_failed',
          problem: 'a probe sandbox did not start',
          fix: 'allow unprivileged user namespaces',
        }),
      status: 'fail',
      fixIncludes: 'Allow unprivileged user namespaces',
    },
    {
      description: 'a sandbox with its own user namespace and --disable-userns passes',
      result: () => checkUserNamespace(hardened),
      status: 'pass',
    },
    {
      description: 'a bubblewrap without --disable-userns warns and names the upgrade',
      result: () => checkUserNamespace({ ...hardened, disableUserns: false }),
      status: 'warn',
      fixIncludes: 'bubblewrap to 0.8',
    },
    {
      description: "a sandbox in the worker's user namespace warns",
      result: () => checkUserNamespace({ ...hardened, ownUserNamespace: false, uidMap: '0 0 4294967295' }),
      status: 'warn',
      fixIncludes: 'max_user_namespaces',
    },
    {
      description: 'no probe sandbox skips the user namespace row',
      result: () => checkUserNamespace({ ran: false, problem: 'no bwrap' }),
      status: 'skip',
    },
    { description: 'Seccomp: 2 inside passes', result: () => checkSeccomp(hardened), status: 'pass' },
    {
      description: 'Seccomp: 0 inside warns',
      result: () => checkSeccomp({ ...hardened, seccompMode: 0 }),
      status: 'warn',
      fixIncludes: 'CONFIG_SECCOMP_FILTER',
    },
    {
      description: 'an architecture without a filter warns',
      result: () => checkSeccomp({ ...hardened, arch: 'ppc64', filterBuilt: false, seccompMode: 0 }),
      status: 'warn',
      fixIncludes: 'x86_64 or aarch64',
    },
    {
      description: 'no probe sandbox skips the filter row',
      result: () => checkSeccomp({ ran: false, problem: 'no bwrap' }),
      status: 'skip',
    },
    {
      description: 'sandbox limits with a cgroup pass',
      result: () =>
        checkSandboxLimits({ cgroup: 'v2', enforced: ['memoryMiB 4096', 'maxProcesses 1024'], unenforced: [], problem: '', fix: '' }),
      status: 'pass',
    },
    {
      description: 'sandbox limits without a cgroup warn, naming each limit and the delegation fix',
      result: () =>
        checkSandboxLimits({
          cgroup: 'none',
          enforced: ['tmpMiB 1024', 'openFiles 8192'],
          unenforced: ['memoryMiB 4096', 'maxProcesses 1024', 'cpuWeight 50'],
          problem: 'cgroup v1 lets only root make cgroups, and the worker is not root',
          fix: CGROUP_FIX,
        }),
      status: 'warn',
      fixIncludes: 'Delegate=yes',
    },
    { description: 'Node 18 fails', result: () => checkNode('v18.20.0'), status: 'fail', fixIncludes: 'Node 22' },
    { description: 'Node 20 warns about the glob tool', result: () => checkNode('v20.19.0'), status: 'warn', fixIncludes: 'glob' },
    { description: 'Node 22 passes', result: () => checkNode('v22.1.0'), status: 'pass' },
    {
      description: 'missing variables fail and are named',
      result: () => checkEnv({ environmentId: undefined, environmentKey: 'k' }),
      status: 'fail',
      fixIncludes: 'Export',
    },
    { description: 'both variables set passes', result: () => checkEnv({ environmentId: 'env_1', environmentKey: 'k' }), status: 'pass' },
    {
      description: 'missing variables are skipped offline',
      result: () => checkEnv({ environmentId: undefined, environmentKey: 'k', offline: true }),
      status: 'skip',
    },
    {
      description: 'set variables pass offline too',
      result: () => checkEnv({ environmentId: 'env_1', environmentKey: 'k', offline: true }),
      status: 'pass',
    },
    {
      description: 'a clock 2 minutes ahead warns about webhook signatures',
      result: () => checkClock(new Date(0).toUTCString(), 120_000),
      status: 'warn',
      fixIncludes: 'NTP',
    },
    { description: 'a clock 3 seconds off passes', result: () => checkClock(new Date(0).toUTCString(), 3_000), status: 'pass' },
    { description: 'no Date header skips the clock check', result: () => checkClock(undefined, 0), status: 'skip' },
  ];
  it.each(rows)('$description', ({ result, status, fixIncludes }) => {
    const r = result();
    expect(r.status).toBe(status);
    if (fixIncludes) expect(r.fix).toContain(fixIncludes);
    if (status === 'pass') expect(r.fix).toBe('');
  });

  it('names the fix for each API failure status', () => {
    expect(apiFix(401)).toContain('key was refused');
    expect(apiFix(404)).toContain('ANTHROPIC_ENVIRONMENT_ID');
    expect(apiFix(undefined)).toContain('ANTHROPIC_BASE_URL');
    expect(apiFix(503)).toContain('retry');
  });
});

describe('runChecks', () => {
  const input = { mountParent: '/mnt/memory', environmentId: 'env_1', environmentKey: 'sk-secret-key', baseURL: undefined, offline: false };

  it('passes every check on a healthy host', async () => {
    const results = await runChecks(healthy, input);
    expect(results.map((r) => r.id)).toEqual([
      'posix',
      'o_nofollow',
      'mount_parent',
      'case_sensitive',
      'bash',
      'sandbox',
      'user_namespace',
      'seccomp',
      'sandbox_limits',
      'node',
      'env',
      'api',
      'clock',
    ]);
    expect(results.every((r) => r.status === 'pass')).toBe(true);
  });

  it('skips the case check when the parent is missing, and fails overall', async () => {
    const results = await runChecks({ ...healthy, dirState: async () => 'missing' }, input);
    expect(results.find((r) => r.id === 'case_sensitive')?.status).toBe('skip');
    expect(allPassed(results)).toBe(false);
  });

  it('warns, without failing, on a case-insensitive filesystem', async () => {
    const results = await runChecks({ ...healthy, caseSensitive: async () => false }, input);
    expect(results.find((r) => r.id === 'case_sensitive')?.status).toBe('warn');
    expect(allPassed(results)).toBe(true);
  });

  it('reports a refused key as a failing API check and skips the clock', async () => {
    const results = await runChecks({ ...healthy, api: async () => ({ ok: false, status: 401, message: 'HTTP 401' }) }, input);
    expect(results.find((r) => r.id === 'api')).toMatchObject({ status: 'fail', fix: expect.stringContaining('key was refused') });
    expect(results.find((r) => r.id === 'clock')?.status).toBe('skip');
  });

  it('never calls the API offline or without a key', async () => {
    let calls = 0;
    const counting = { ...healthy, api: async () => (calls++, { ok: true as const, latencyMs: 1, serverDate: undefined }) };
    await runChecks(counting, { ...input, offline: true });
    await runChecks(counting, { ...input, environmentKey: undefined });
    expect(calls).toBe(0);
  });
});

describe('the doctor command', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-doctor-test-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('prints a table and exits 5 when a check fails, without printing the key', async () => {
    const io = captureIo({ ANTHROPIC_ENVIRONMENT_ID: 'env_1', ANTHROPIC_ENVIRONMENT_KEY: 'sk-very-secret' });
    const code = await runDoctor(doctorCommand({ ...healthy, isExecutable: async () => false }), [], io);
    expect(code).toBe(EXIT.CHECK_FAILED);
    expect(io.out).toMatch(/FAIL\s+\/bin\/bash for the bash tool/);
    expect(io.out).toContain('fix: Install bash');
    expect(io.out + io.err).not.toContain('sk-very-secret');
  });

  it('prints JSON with --json', async () => {
    const io = captureIo({ ANTHROPIC_ENVIRONMENT_ID: 'env_1', ANTHROPIC_ENVIRONMENT_KEY: 'k' });
    const code = await runDoctor(doctorCommand(healthy), ['--json'], io);
    expect(code).toBe(EXIT.OK);
    const parsed = JSON.parse(io.out) as { ok: boolean; checks: Array<{ id: string }> };
    expect(parsed.ok).toBe(true);
    expect(parsed.checks).toHaveLength(13);
  });

  it('passes its host checks for real in a writable temp folder', async () => {
    const io = captureIo({});
    await runDoctor(doctorCommand(), ['--mount-parent', dir, '--offline', '--json'], io);
    const { checks } = JSON.parse(io.out) as { checks: Array<{ id: string; status: string }> };
    const status = Object.fromEntries(checks.map((c) => [c.id, c.status]));
    // Offline, no credentials: the credential row is skipped (only the API checks need them), not failed.
    expect(status).toMatchObject({
      posix: 'pass',
      o_nofollow: 'pass',
      mount_parent: 'pass',
      bash: 'pass',
      env: 'skip',
      api: 'skip',
      clock: 'skip',
    });
    expect(checks.find((c) => c.id === 'env')).toMatchObject({
      detail: '--offline (not set: ANTHROPIC_ENVIRONMENT_ID, ANTHROPIC_ENVIRONMENT_KEY)',
    });
    expect(['pass', 'warn']).toContain(status['case_sensitive']);
    // Where a sandbox starts (this Linux host), its user namespace and filter are seen from inside.
    if (status['sandbox'] === 'pass' && ['x64', 'arm64'].includes(process.arch)) {
      expect(status).toMatchObject({ user_namespace: 'pass', seccomp: 'pass' });
      expect(checks.find((c) => c.id === 'seccomp')).toMatchObject({ detail: expect.stringContaining('Seccomp: 2') });
    }
    // The probes clean up after themselves.
    expect(await fs.readdir(dir)).toEqual([]);
  });

  it('fails the mount parent check for a folder that does not exist', async () => {
    const io = captureIo({});
    const code = await runDoctor(doctorCommand(), ['--mount-parent', path.join(dir, 'nope'), '--offline'], io);
    expect(code).toBe(EXIT.CHECK_FAILED);
    expect(io.out).toMatch(/FAIL\s+mount parent exists and is writable/);
  });

  it('answers --help with the exit codes it can return, and no other', async () => {
    const io = captureIo({});
    expect(await runDoctor(doctorCommand(healthy), ['--help'], io)).toBe(EXIT.OK);
    expect(io.out).toContain('--mount-parent');
    expect(io.out).toMatch(/^  5 +a check failed/m);
    expect(io.out).not.toMatch(/^  (4|10|143) /m);
  });
});

describe('doctor against the emulator', () => {
  it('passes the API and clock checks with the environment key, and fails them with a wrong key', async () => {
    const { startEmulator } = await import('../../src/testing/index.js');
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-doctor-api-'));
    const emu = await startEmulator({ mountRoot: dir });
    try {
      const good = captureIo({
        ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
        ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
        ANTHROPIC_BASE_URL: emu.baseURL,
      });
      await runDoctor(doctorCommand(), ['--mount-parent', dir, '--json'], good);
      const checks = (JSON.parse(good.out) as { checks: Array<{ id: string; status: string }> }).checks;
      expect(checks.find((c) => c.id === 'api')?.status).toBe('pass');
      expect(checks.find((c) => c.id === 'clock')?.status).toBe('pass');
      expect(checks.find((c) => c.id === 'env')?.status).toBe('pass');

      const bad = captureIo({
        ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
        ANTHROPIC_ENVIRONMENT_KEY: 'wrong-key',
        ANTHROPIC_BASE_URL: emu.baseURL,
      });
      const code = await runDoctor(doctorCommand(), ['--mount-parent', dir], bad);
      expect(code).toBe(EXIT.CHECK_FAILED);
      expect(bad.out).toMatch(/FAIL\s+API reachable with the key\s+.*HTTP 401/);
      expect(bad.out).not.toContain('wrong-key');
    } finally {
      await emu.close();
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
