import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { bwrapArgs } from './bwrap-args.js';
import { feedSeccomp, seccompArgs } from './bwrap-features.js';
import { probeSandbox } from './runtime.js';
import { seccompArchOf } from './seccomp/filter.js';
import { sandboxEnvironment } from './tool-env.js';

/** What a probe sandbox, built as a session's is, saw of the kernel from inside (for `doctor`). */
export type SandboxKernelReport =
  | { ran: false; problem: string }
  | {
      ran: true;
      /** Node's name of this host's architecture. */
      arch: string;
      /** A seccomp filter is built for this architecture. */
      filterBuilt: boolean;
      /** The `Seccomp:` mode of the sandbox's process (2: a filter is installed); undefined when unreadable. */
      seccompMode: number | undefined;
      /** The sandbox's `/proc/self/uid_map`, trimmed. */
      uidMap: string;
      /** The sandbox's uid map differs from the worker's: it has a user namespace of its own. */
      ownUserNamespace: boolean;
      /** bubblewrap refused nested user namespaces (`--disable-userns`; it checks that itself before it starts the command). */
      disableUserns: boolean;
    };

const PROBE_TIMEOUT_MS = 15_000;

/** Runs in the probe sandbox: what a process there reads of itself. */
const INSIDE =
  "const fs = require('node:fs'); process.stdout.write(JSON.stringify({ status: fs.readFileSync('/proc/self/status', 'utf8'), " +
  "uidMap: fs.readFileSync('/proc/self/uid_map', 'utf8') }))";

/** Start one sandbox the way the worker starts a session's and report what its process sees of the kernel. */
export async function probeSandboxKernel(opts: { bwrapPath?: string | undefined } = {}): Promise<SandboxKernelReport> {
  const probe = await probeSandbox(opts);
  if (!probe.ok) return { ran: false, problem: probe.problem };
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-kernel-probe-'));
  try {
    const args = bwrapArgs({
      system: probe.layout.system,
      readOnly: probe.layout.readOnly,
      workdir: dir,
      stores: [],
      readWrite: [],
      hide: [],
      network: 'host',
      userNamespace: probe.userNamespace,
      disableNestedUserNamespaces: probe.disableUserns,
      env: sandboxEnvironment(process.env, [], dir),
      command: [probe.layout.node, '-e', INSIDE],
    });
    const run = await runCapturing(probe.bwrap, probe.seccomp === undefined ? args : [...seccompArgs(3), ...args], probe.seccomp);
    if (!run.ok) return { ran: false, problem: run.problem };
    let seen: { status: string; uidMap: string };
    try {
      seen = JSON.parse(run.stdout) as { status: string; uidMap: string };
    } catch {
      return { ran: false, problem: `the probe sandbox printed no report (${run.stdout.slice(0, 200)})` };
    }
    const mode = /^Seccomp:\s*(\d+)\s*$/m.exec(seen.status)?.[1];
    const uidMap = seen.uidMap.trim().replace(/\s+/g, ' ');
    return {
      ran: true,
      arch: process.arch,
      filterBuilt: seccompArchOf(process.arch) !== undefined,
      seccompMode: mode === undefined ? undefined : Number(mode),
      uidMap,
      ownUserNamespace: uidMap !== workerUidMap(),
      disableUserns: probe.disableUserns,
    };
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

function workerUidMap(): string {
  try {
    return fs.readFileSync('/proc/self/uid_map', 'utf8').trim().replace(/\s+/g, ' ');
  } catch {
    return '';
  }
}

function runCapturing(
  cmd: string,
  args: string[],
  seccomp: Buffer | undefined,
): Promise<{ ok: true; stdout: string } | { ok: false; problem: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe', seccomp === undefined ? 'ignore' : 'pipe'], env: {} });
    if (seccomp !== undefined) feedSeccomp(child.stdio[3] as NodeJS.WritableStream | null, seccomp);
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => {
      if (stdout.length < 64_000) stdout += d.toString('utf8');
    });
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-1_000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), PROBE_TIMEOUT_MS);
    child.once('error', (e) => {
      clearTimeout(timer);
      resolve({ ok: false, problem: e.message });
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve({ ok: true, stdout });
      else resolve({ ok: false, problem: `the probe sandbox ended with ${signal ?? `exit code ${code}`}: ${stderr.trim()}` });
    });
  });
}
