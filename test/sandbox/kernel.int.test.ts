// The kernel as an agent sees it from its session's sandbox, with real bubblewrap: a seccomp filter
// is installed (`Seccomp: 2`, on the sandbox's init too), the sandbox has a user namespace of its
// own and cannot make another (`unshare -Ur` fails, for a worker running as root and for one
// running as an unprivileged user), and each refused class of system calls, tried by raw number
// from python, fails with its errno. With the hardening switched off (an internal switch of the
// tests, not an option), the same attempts get through, so these tests can fail. The everyday
// tools (git, python3, node, npm, pip, curl) still work under the filter.
import { execFile, spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSandboxOption } from '../../src/sandbox/options.js';
import { resolveSandbox } from '../../src/sandbox/resolve.js';
import type { SandboxRuntime } from '../../src/sandbox/runtime.js';
import { SessionSandbox } from '../../src/sandbox/session-sandbox.js';
import { REPO_ROOT } from '../cli/spawn-cli.js';
import { captureLogger } from '../worker/helpers.js';

const log = pino({ level: 'silent' });
const onLinuxX64 = process.platform === 'linux' && process.arch === 'x64';
const asRoot = process.getuid?.() === 0;
const ATTACKS = path.join(REPO_ROOT, 'test/sandbox/fixtures/kernel-attacks.py');
const SANDBOX_BASH = path.join(REPO_ROOT, 'test/sandbox/fixtures/sandbox-bash.ts');

type BwrapRuntime = Extract<SandboxRuntime, { kind: 'bwrap' }>;

/** The runtime with the kernel hardening off: no filter, nested user namespaces allowed. */
const hardeningOff = (r: BwrapRuntime): BwrapRuntime => ({ ...r, seccomp: undefined, disableUserns: false });

/** What each attempt of kernel-attacks.py gets under the filter. */
const REFUSED = {
  unshare: 'EPERM',
  setns: 'EPERM',
  clone_newuser: 'EPERM',
  clone3: 'ENOSYS',
  mount: 'EPERM',
  umount2: 'EPERM',
  pivot_root: 'EPERM',
  chroot: 'EPERM',
  open_tree: 'EPERM',
  fsopen: 'EPERM',
  io_uring_setup: 'ENOSYS',
  io_uring_enter: 'ENOSYS',
  io_uring_register: 'ENOSYS',
  open_tree_attr: 'EPERM',
  move_mount: 'EPERM',
  fsconfig: 'EPERM',
  fsmount: 'EPERM',
  fspick: 'EPERM',
  mount_setattr: 'EPERM',
  process_vm_writev: 'EPERM',
  kexec_file_load: 'EPERM',
  ptrace: 'EPERM',
  process_vm_readv: 'EPERM',
  keyctl: 'EPERM',
  add_key: 'EPERM',
  request_key: 'EPERM',
  perf_event_open: 'EPERM',
  bpf: 'EPERM',
  userfaultfd: 'EPERM',
  kexec_load: 'EPERM',
  socket_packet: 'EAFNOSUPPORT',
  socket_bluetooth: 'EAFNOSUPPORT',
  socket_alg: 'EAFNOSUPPORT',
  socket_vsock: 'EAFNOSUPPORT',
  socketpair_packet: 'EAFNOSUPPORT',
  tiocsti: 'EPERM',
  // Allowed: the families a program needs, and terminal ioctls other than TIOCSTI.
  socket_unix: 'ok',
  socket_inet: 'ok',
  socket_inet6: 'ok',
  socket_netlink: 'ok',
  tcgets: 'ok',
};

interface Rig {
  tmp: string;
  work: string;
  bash(command: string): Promise<string>;
  close(): Promise<void>;
}

async function rig(runtime: BwrapRuntime): Promise<Rig> {
  const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-kernel-'));
  const work = path.join(tmp, 'work');
  await fsp.mkdir(work);
  await fsp.copyFile(ATTACKS, path.join(work, 'attacks.py'));
  const sandbox = new SessionSandbox(
    runtime,
    { workdir: work, allowedRoots: [], readOnlyRoots: [], maxFileBytes: undefined, hide: [] },
    log,
  );
  const bash = sandbox.tools().find((t) => t.name === 'bash')!;
  return {
    tmp,
    work,
    bash: async (command) => {
      try {
        const out = await bash.run({ command: `{ ${command}; } 2>&1; echo "exit=$?"` }, undefined);
        return typeof out === 'string' ? out : JSON.stringify(out);
      } catch (e) {
        return `tool error: ${(e as Error).message}`;
      }
    },
    close: async () => {
      await sandbox.close();
      await fsp.rm(tmp, { recursive: true, force: true });
    },
  };
}

/** The JSON line kernel-attacks.py printed. */
function attacks(out: string): Record<string, string> {
  const line = out.split('\n').find((l) => l.startsWith('{'));
  if (!line) throw new Error(`kernel-attacks.py printed no result: ${out}`);
  return JSON.parse(line) as Record<string, string>;
}

let runtime: BwrapRuntime;
beforeAll(async () => {
  if (!onLinuxX64) return;
  const r = await resolveSandbox(resolveSandboxOption({ mode: 'bwrap' }), { log, concurrency: 2 });
  if (r.kind !== 'bwrap') throw new Error('the sandbox did not start');
  runtime = r;
});

describe.runIf(onLinuxX64)(`the kernel from a session sandbox, worker uid ${process.getuid?.()}`, () => {
  let r: Rig;
  beforeAll(async () => {
    r = await rig(runtime);
  });
  afterAll(async () => {
    await r?.close();
  });

  it('the sandbox has a user namespace, its filter is installed (init included), and runs under no_new_privs', async () => {
    expect(runtime.userNamespace).toBe(true);
    expect(runtime.seccomp).toBeDefined();
    const out = await r.bash(
      `grep -E '^(Seccomp|NoNewPrivs|CapEff):' /proc/self/status; grep '^Seccomp:' /proc/1/status; cat /proc/self/uid_map`,
    );
    expect(out).toMatch(/^Seccomp:\t2$/m);
    expect(out.match(/^Seccomp:\t2$/gm)).toHaveLength(2);
    expect(out).toMatch(/^NoNewPrivs:\t1$/m);
    expect(out).toMatch(/^CapEff:\t0+$/m);
    // The host's own map is the whole range; a user namespace maps one id.
    expect(out).not.toMatch(/4294967295/);
    expect(out).toMatch(/^\s*\d+\s+\d+\s+1$/m);
  });

  it('unshare -Ur, unshare -U and unshare -m fail inside', async () => {
    const out = await r.bash('unshare -Ur true; echo "r=$?"; unshare -U true; echo "u=$?"; unshare -m true; echo "m=$?"');
    expect(out).toMatch(/^r=[1-9]/m);
    expect(out).toMatch(/^u=[1-9]/m);
    expect(out).toMatch(/^m=[1-9]/m);
    expect(out).toMatch(/Operation not permitted/);
  });

  it('each refused class of system calls fails with its errno', async () => {
    const got = attacks(await r.bash('python3 attacks.py'));
    expect(got).toEqual(REFUSED);
  });

  it('git, python3, node, npm, pip and curl still work', async () => {
    const out = await r.bash(
      [
        'git init -q repo && git -C repo -c user.email=a@b.c -c user.name=a commit -q --allow-empty -m one && git -C repo log --format=git-%s',
        `python3 -c 'import ssl, sqlite3, subprocess, threading; t = threading.Thread(target=print, args=("py-thread",)); t.start(); t.join(); print("py", subprocess.run(["true"]).returncode)'`,
        `node -e 'const { Worker } = require("node:worker_threads"); require("node:child_process").execFileSync("true"); new Worker("1", { eval: true }).on("exit", (c) => console.log("node-worker", c)); require("node:fs").promises.readFile("attacks.py").then((b) => console.log("node-read", b.length > 0))'`,
        'npm --version >/dev/null && echo npm-ok',
        'pip --version >/dev/null && echo pip-ok',
        'echo from-a-file > f.txt && curl --version >/dev/null && curl -s "file://$PWD/f.txt"',
      ].join('; '),
    );
    expect(out).toMatch(/^git-one$/m);
    expect(out).toMatch(/^py-thread$/m);
    expect(out).toMatch(/^py 0$/m);
    expect(out).toMatch(/^node-worker 0$/m);
    expect(out).toMatch(/^node-read true$/m);
    expect(out).toMatch(/^npm-ok$/m);
    expect(out).toMatch(/^pip-ok$/m);
    expect(out).toMatch(/^from-a-file$/m);
  }, 60_000);

  describe('with the hardening off (the control)', () => {
    let off: Rig;
    beforeAll(async () => {
      off = await rig(hardeningOff(runtime));
    });
    afterAll(async () => {
      await off?.close();
    });

    it('no filter is installed and the same attempts get through', async () => {
      // -U without -r: a root worker's sandbox maps host uid 0, which a nested namespace may map
      // only with CAP_SETFCAP (Linux 5.12 on), so `-r` fails there for that reason alone.
      const status = await off.bash('grep ^Seccomp: /proc/self/status; unshare -U true; echo "u=$?"');
      expect(status).toMatch(/^Seccomp:\t0$/m);
      expect(status).toMatch(/^u=0$/m);
      const got = attacks(await off.bash('python3 attacks.py'));
      for (const call of ['ptrace', 'keyctl', 'add_key', 'open_tree', 'process_vm_readv', 'userfaultfd', 'clone_newuser', 'unshare']) {
        expect({ call, got: got[call] }).toEqual({ call, got: 'ok' });
      }
      expect(got['io_uring_setup']).not.toBe('ENOSYS');
      expect(got['process_vm_writev']).toBe('ok');
      expect(got['mount']).not.toBe('EPERM');
    });

    it('without the filter, --disable-userns alone still refuses a nested user namespace', async () => {
      const bwrapOnly = await rig({ ...runtime, seccomp: undefined });
      try {
        const out = await bwrapOnly.bash('grep ^Seccomp: /proc/self/status; unshare -U true; echo "u=$?"');
        expect(out).toMatch(/^Seccomp:\t0$/m);
        expect(out).toMatch(/^u=[1-9]/m);
        expect(out).toMatch(/No space left on device/);
      } finally {
        await bwrapOnly.close();
      }
    });
  });
});

describe.runIf(onLinuxX64)('with a bubblewrap older than 0.8 (no --disable-userns)', () => {
  let tmp: string;
  let old: string;
  beforeAll(async () => {
    tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-kernel-oldbwrap-'));
    // Stands for bubblewrap 0.7: the option is neither listed nor accepted.
    old = path.join(tmp, 'bwrap');
    const real = (await promisify(execFile)('sh', ['-c', 'command -v bwrap'])).stdout.trim();
    await fsp.writeFile(
      old,
      '#!/bin/sh\n' +
        `if [ "$1" = --help ]; then '${real}' --help | grep -v -- --disable-userns; exit 0; fi\n` +
        'for a in "$@"; do if [ "$a" = --disable-userns ]; then echo "bwrap: Unknown option --disable-userns" >&2; exit 1; fi; done\n' +
        `exec '${real}' "$@"\n`,
      { mode: 0o755 },
    );
  });
  afterAll(async () => {
    await fsp.rm(tmp, { recursive: true, force: true });
  });

  it('the worker warns and names the upgrade, and the filter alone still refuses nested user namespaces', async () => {
    const cap = captureLogger('info');
    const r = await resolveSandbox(resolveSandboxOption({ mode: 'bwrap', bwrapPath: old }), { log: cap.logger, concurrency: 2 });
    if (r.kind !== 'bwrap') throw new Error('the sandbox did not start');
    expect(r.disableUserns).toBe(false);
    expect(cap.lines.some((l) => l.level === 40 && /no --disable-userns .*upgrade bubblewrap/.test(String(l.msg)))).toBe(true);
    const inside = await rig(r);
    try {
      const out = await inside.bash('grep ^Seccomp: /proc/self/status; unshare -U true; echo "u=$?"');
      expect(out).toMatch(/^Seccomp:\t2$/m);
      expect(out).toMatch(/^u=[1-9]/m);
      expect(out).toMatch(/Operation not permitted/);
    } finally {
      await inside.close();
    }
  });
});

describe.runIf(onLinuxX64 && asRoot)('the kernel from a session sandbox, worker run as an unprivileged user', () => {
  let tmp: string;
  /** Folders above the checkout that uid 65534 could not pass through, with the mode they had. */
  const opened: Array<{ dir: string; mode: number }> = [];
  beforeAll(async () => {
    tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-kernel-nobody-'));
    await fsp.mkdir(path.join(tmp, 'work'));
    await fsp.chown(tmp, 65534, 65534);
    await fsp.chown(path.join(tmp, 'work'), 65534, 65534);
    // The unprivileged worker loads its code from this checkout: a checkout under a private folder
    // (a `mktemp -d` one is 0700) gets search permission for others until the tests end.
    for (let dir = REPO_ROOT; ; dir = path.dirname(dir)) {
      const { mode } = await fsp.stat(dir);
      if ((mode & 0o001) === 0) {
        opened.push({ dir, mode: mode & 0o7777 });
        await fsp.chmod(dir, (mode & 0o7777) | 0o001);
      }
      if (dir === path.dirname(dir)) break;
    }
  });
  afterAll(async () => {
    for (const { dir, mode } of opened.splice(0)) await fsp.chmod(dir, mode);
    await fsp.rm(tmp, { recursive: true, force: true });
  });

  /** The fixture, run by uid 65534 (setpriv), its worker-side code and bubblewrap included. */
  async function asNobody(hardening: 'on' | 'off', ...commands: string[]): Promise<{ uid: number; outputs: string[] }> {
    return asNobodyWith({}, hardening, ...commands);
  }

  async function asNobodyWith(
    env: Record<string, string>,
    hardening: 'on' | 'off',
    ...commands: string[]
  ): Promise<{ uid: number; outputs: string[] }> {
    const { stdout } = await promisify(execFile)(
      'setpriv',
      [
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        '--',
        process.execPath,
        '--import',
        'tsx',
        SANDBOX_BASH,
        path.join(tmp, 'work'),
        hardening,
        ...commands,
      ],
      { cwd: REPO_ROOT, env: { ...process.env, HOME: tmp, ...env }, timeout: 60_000 },
    );
    return JSON.parse(stdout) as { uid: number; outputs: string[] };
  }

  it('unshare -Ur fails inside, under the filter; with the hardening off it succeeds', async () => {
    const cmd = 'grep ^Seccomp: /proc/self/status; id -u; unshare -Ur true; echo "r=$?"';
    const on = await asNobody('on', cmd);
    expect(on.uid).toBe(65534);
    expect(on.outputs[0]).toMatch(/^Seccomp:\t2$/m);
    expect(on.outputs[0]).toMatch(/^65534$/m);
    expect(on.outputs[0]).toMatch(/^r=[1-9]/m);
    const off = await asNobody('off', cmd);
    expect(off.outputs[0]).toMatch(/^Seccomp:\t0$/m);
    expect(off.outputs[0]).toMatch(/^r=0$/m);
  }, 120_000);

  it("without a cgroup, maxProcesses holds per sandbox: RLIMIT_NPROC in the sandbox's user namespace counts its processes only", async () => {
    // 80 processes of the same user outside the sandbox: a per-user count would leave it none.
    const outside = Array.from({ length: 80 }, () =>
      spawn('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--', 'sleep', '60'], { stdio: 'ignore' }),
    );
    try {
      await new Promise((r) => setTimeout(r, 500));
      const forks = [
        'import os, time',
        'n = 0',
        'for i in range(200):',
        '    try:',
        '        pid = os.fork()',
        '    except OSError:',
        '        break',
        '    if pid == 0:',
        '        time.sleep(30)',
        '        os._exit(0)',
        '    n += 1',
        'print("started", n)',
      ].join('\n');
      const run = await asNobodyWith(
        { MAW_TEST_MAX_PROCESSES: '64' },
        'on',
        `ulimit -u; python3 -c '${forks}'; pkill -9 -x sleep -P $$ 2>/dev/null; pkill -9 python3; true`,
      );
      expect(run.uid).toBe(65534);
      expect(run.outputs[0]).toMatch(/^64$/m);
      const started = Number(/started (\d+)/.exec(run.outputs[0]!)?.[1]);
      console.log(`processes the sandbox could start under maxProcesses 64: ${started}`);
      // Bounded below 64 (the tool host's threads and the shells count too), and not starved by the
      // 80 processes of the same user outside.
      expect(started).toBeGreaterThan(20);
      expect(started).toBeLessThan(64);
    } finally {
      for (const c of outside) c.kill('SIGKILL');
    }
  }, 120_000);
});
