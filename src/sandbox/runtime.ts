import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { coerceError, SandboxUnavailableError } from '../errors.js';
import type { Logger } from '../internal/logger.js';
import { bwrapArgs } from './bwrap-args.js';
import { bwrapFeatures, feedSeccomp, seccompArgs } from './bwrap-features.js';
import { hostLayout, type HostLayout } from './host-layout.js';
import { HOST_NETWORK_WARNING } from './network/network-option.js';
import { releaseSandboxCgroups } from './limits/cgroups.js';
import { prepareSandboxLimits, type SandboxLimitsRuntime } from './limits/session-limits.js';
import type { ResolvedSandboxOptions } from './options.js';
import { hostSeccompFilter } from './seccomp/filter.js';
import { sandboxEnvironment } from './tool-env.js';

/**
 * How the sandbox holds the kernel back, decided with the probe: a user namespace always (for a
 * root worker too, so that its agents' uid 0 has no capability over the host), nested user
 * namespaces refused where bubblewrap can (`--disable-userns`, bubblewrap 0.8), and the seccomp
 * filter of `seccomp/filter.ts` on the architectures it is built for.
 */
export interface SandboxKernelHardening {
  userNamespace: boolean;
  /** bubblewrap refuses user namespaces inside the sandbox (the filter refuses them in any case). */
  disableUserns: boolean;
  /** The encoded seccomp filter bubblewrap installs; `undefined` on an architecture without one. */
  seccomp: Buffer | undefined;
}

/** What a worker runs its sessions' tools in, decided once when it starts. */
export type SandboxRuntime =
  | ({
      kind: 'bwrap';
      bwrap: string;
      layout: HostLayout;
      options: ResolvedSandboxOptions;
      /** How the sandboxes are bounded on this host; absent: only what the view sizes itself. */
      limits?: SandboxLimitsRuntime;
    } & SandboxKernelHardening)
  | { kind: 'none'; chosen: boolean; problem?: string };

/**
 * What a stopped worker's sandboxes leave on the host, removed: the empty parent cgroups of its
 * sessions' cgroups (a parent another worker of the same state folder still uses is left). Returns
 * the folders removed; never throws.
 */
export function releaseSandboxRuntime(runtime: SandboxRuntime): string[] {
  return runtime.kind === 'bwrap' && runtime.limits !== undefined ? releaseSandboxCgroups(runtime.limits.cgroups) : [];
}

/** Whether a sandbox can start on this host, and if not, why and how to fix it. */
export type SandboxProbe =
  | ({ ok: true; bwrap: string; layout: HostLayout } & SandboxKernelHardening)
  | { ok: false; reason: SandboxUnavailableError['reason']; problem: string; fix: string };

/** How to install bubblewrap, per distribution. */
export const BWRAP_INSTALL_FIX =
  'install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora/RHEL: dnf install bubblewrap; Alpine: apk add bubblewrap; Arch: pacman -S bubblewrap)';

const USERNS_FIX =
  'allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04+ also ' +
  'kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap); in a container, run it with a ' +
  'seccomp profile that allows clone(CLONE_NEWUSER) and unshare, or put the sandbox around the container instead; ' +
  'a worker running as root needs the same (a user namespace, user.max_user_namespaces above 0), no other capability';

const PROBE_TIMEOUT_MS = 15_000;

const probes = new Map<string, Promise<SandboxProbe>>();

/**
 * Find bubblewrap and start one throw-away sandbox built the way a session's is (namespaces, no
 * capabilities, the runtime bound in) running `node -e 0`. Cached per executable for the process.
 */
export function probeSandbox(opts: { bwrapPath?: string | undefined; platform?: string } = {}): Promise<SandboxProbe> {
  const platform = opts.platform ?? process.platform;
  const key = `${platform}\0${opts.bwrapPath ?? ''}`;
  let probe = probes.get(key);
  if (!probe) {
    probe = runProbe(platform, opts.bwrapPath);
    probes.set(key, probe);
  }
  return probe;
}

async function runProbe(platform: string, bwrapPath: string | undefined): Promise<SandboxProbe> {
  if (platform !== 'linux') {
    return {
      ok: false,
      reason: 'platform',
      problem: `bubblewrap sandboxes exist on Linux only; this host is ${platform}`,
      fix: "run the worker in a Linux VM or container to isolate sessions, or set sandbox: 'none' to say you accept tools running in the worker process",
    };
  }
  const bwrap = bwrapPath ?? findOnPath('bwrap');
  if (bwrap === undefined || !isExecutable(bwrap)) {
    return {
      ok: false,
      reason: 'missing',
      problem: `bubblewrap (bwrap) ${bwrap === undefined ? 'is not on PATH' : `at ${bwrap} is not executable`}`,
      fix: BWRAP_INSTALL_FIX,
    };
  }
  let layout: HostLayout;
  try {
    layout = hostLayout();
  } catch (e) {
    const err = coerceError(e);
    return { ok: false, reason: 'host_entry_missing', problem: err.message, fix: 'build the package (npm run build)' };
  }
  const hardening: SandboxKernelHardening = {
    userNamespace: true,
    disableUserns: (await bwrapFeatures(bwrap)).disableUserns,
    seccomp: hostSeccompFilter(),
  };
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-sandbox-probe-'));
  try {
    const args = bwrapArgs({
      system: layout.system,
      readOnly: layout.readOnly,
      workdir: dir,
      stores: [],
      readWrite: [],
      hide: [],
      network: 'host',
      userNamespace: hardening.userNamespace,
      disableNestedUserNamespaces: hardening.disableUserns,
      env: sandboxEnvironment(process.env, [], dir),
      command: [layout.node, '-e', 'process.exit(0)'],
      // Sized as a session's are, so a bubblewrap without --size fails here rather than per session.
      tmpBytes: 1024 * 1024,
    });
    const run = await runBounded(bwrap, args, PROBE_TIMEOUT_MS, hardening.seccomp);
    if (run.ok) return { ok: true, bwrap, layout, ...hardening };
    return { ok: false, reason: 'probe_failed', problem: `a probe sandbox did not start (${run.problem})`, fix: USERNS_FIX };
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/**
 * Decide what the worker runs its tools in. `'none'` is taken as chosen. `'auto'` takes the
 * sandbox when the probe starts one, and otherwise runs without it after one warning naming the
 * fix (a louder one when several sessions share the process). `'bwrap'` throws
 * {@link SandboxUnavailableError} when no sandbox can start.
 */
export async function resolveSandbox(
  options: ResolvedSandboxOptions,
  ctx: { log: Logger; concurrency: number; platform?: string; stateDir?: string },
): Promise<SandboxRuntime> {
  if (options.mode === 'none') return { kind: 'none', chosen: true };
  const probe = await probeSandbox({ bwrapPath: options.bwrapPath, ...(ctx.platform !== undefined ? { platform: ctx.platform } : {}) });
  if (probe.ok) {
    ctx.log.info({ bwrap: probe.bwrap, network: options.network.type }, 'each session runs its tools in a bubblewrap sandbox');
    if (options.network.type === 'host') ctx.log.warn(HOST_NETWORK_WARNING);
    if (probe.seccomp === undefined) {
      ctx.log.warn(
        { arch: process.arch },
        `sandboxes run without a seccomp filter: none is built for ${process.arch} (x64 and arm64 only); io_uring, keyctl, ptrace and the mount API stay open to the agent`,
      );
    }
    if (!probe.disableUserns) {
      ctx.log.warn(
        { bwrap: probe.bwrap },
        `${probe.bwrap} has no --disable-userns (bubblewrap before 0.8): only the seccomp filter keeps the agent from nested user namespaces; upgrade bubblewrap`,
      );
    }
    const limits =
      ctx.stateDir !== undefined ? await prepareSandboxLimits(options.limits, { stateDir: ctx.stateDir, log: ctx.log }) : undefined;
    const { userNamespace, disableUserns, seccomp } = probe;
    return {
      kind: 'bwrap',
      bwrap: probe.bwrap,
      layout: probe.layout,
      options,
      userNamespace,
      disableUserns,
      seccomp,
      ...(limits ? { limits } : {}),
    };
  }
  if (options.mode === 'bwrap') {
    throw new SandboxUnavailableError(probe.reason, `sandbox: 'bwrap' cannot start a sandbox: ${probe.problem}. Fix: ${probe.fix}`);
  }
  const message = `sessions' tools run in the worker process without a sandbox: ${probe.problem}. Fix: ${probe.fix}; or set sandbox: 'none' to choose this`;
  if (ctx.concurrency > 1) {
    ctx.log.error(
      { concurrency: ctx.concurrency, reason: probe.reason },
      `${message}. With concurrency ${ctx.concurrency} every session's agent can read and change the other sessions' folders and read this process's credentials`,
    );
  } else {
    ctx.log.warn({ reason: probe.reason }, message);
  }
  return { kind: 'none', chosen: false, problem: probe.problem };
}

function findOnPath(name: string): string | undefined {
  for (const dir of (process.env['PATH'] ?? '/usr/local/bin:/usr/bin:/bin').split(':')) {
    if (dir === '') continue;
    const p = path.join(dir, name);
    if (isExecutable(p)) return p;
  }
  return undefined;
}

function isExecutable(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

function runBounded(
  cmd: string,
  args: string[],
  timeoutMs: number,
  seccomp: Buffer | undefined,
): Promise<{ ok: true } | { ok: false; problem: string }> {
  return new Promise((resolve) => {
    // fd 3 carries the seccomp filter, so the probe starts under it as every session does.
    const withFilter = seccomp === undefined ? args : [...seccompArgs(3), ...args];
    const child = spawn(cmd, withFilter, { stdio: ['ignore', 'ignore', 'pipe', seccomp === undefined ? 'ignore' : 'pipe'], env: {} });
    if (seccomp !== undefined) feedSeccomp(child.stdio[3] as NodeJS.WritableStream | null, seccomp);
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-1_000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      resolve({ ok: false, problem: e.message });
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve({ ok: true });
      else
        resolve({
          ok: false,
          problem: `${signal ? `killed by ${signal}` : `exit code ${code}`}${stderr.trim() ? `: ${stderr.trim()}` : ''}`,
        });
    });
  });
}
