import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { coerceError, SandboxUnavailableError } from '../errors.js';
import type { Logger } from '../internal/logger.js';
import { bwrapArgs } from './bwrap-args.js';
import { hostLayout, type HostLayout } from './host-layout.js';
import { prepareSandboxLimits, type SandboxLimitsRuntime } from './limits/session-limits.js';
import type { ResolvedSandboxOptions } from './options.js';
import { sandboxEnvironment } from './tool-env.js';

/** What a worker runs its sessions' tools in, decided once when it starts. */
export type SandboxRuntime =
  | {
      kind: 'bwrap';
      bwrap: string;
      layout: HostLayout;
      options: ResolvedSandboxOptions;
      userNamespace: boolean;
      /** How the sandboxes are bounded on this host; absent: only what the view sizes itself. */
      limits?: SandboxLimitsRuntime;
    }
  | { kind: 'none'; chosen: boolean; problem?: string };

/** Whether a sandbox can start on this host, and if not, why and how to fix it. */
export type SandboxProbe =
  | { ok: true; bwrap: string; layout: HostLayout; userNamespace: boolean }
  | { ok: false; reason: SandboxUnavailableError['reason']; problem: string; fix: string };

/** How to install bubblewrap, per distribution. */
export const BWRAP_INSTALL_FIX =
  'install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora/RHEL: dnf install bubblewrap; Alpine: apk add bubblewrap; Arch: pacman -S bubblewrap)';

const USERNS_FIX =
  'allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04+ also ' +
  'kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap); in a container, run it with a ' +
  'seccomp profile that allows clone(CLONE_NEWUSER) and unshare, or put the sandbox around the container instead';

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
  const userNamespace = process.getuid?.() !== 0;
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
      userNamespace,
      env: sandboxEnvironment(process.env, [], dir),
      command: [layout.node, '-e', 'process.exit(0)'],
      // Sized as a session's are, so a bubblewrap without --size fails here rather than per session.
      tmpBytes: 1024 * 1024,
    });
    const run = await runBounded(bwrap, args, PROBE_TIMEOUT_MS);
    if (run.ok) return { ok: true, bwrap, layout, userNamespace };
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
    ctx.log.info({ bwrap: probe.bwrap, network: options.network }, 'each session runs its tools in a bubblewrap sandbox');
    const limits =
      ctx.stateDir !== undefined ? await prepareSandboxLimits(options.limits, { stateDir: ctx.stateDir, log: ctx.log }) : undefined;
    return {
      kind: 'bwrap',
      bwrap: probe.bwrap,
      layout: probe.layout,
      options,
      userNamespace: probe.userNamespace,
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

function runBounded(cmd: string, args: string[], timeoutMs: number): Promise<{ ok: true } | { ok: false; problem: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'], env: {} });
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
