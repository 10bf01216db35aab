/**
 * One row of the container suite: `podman --runtime runc run` of the scenario in the suite's root
 * file system, with the row's own security flags, and its one JSON line parsed.
 *
 * podman keeps its storage under the suite's cache folder (`--root`, `--runroot`), so the suite
 * never touches another podman user's containers. `runc`, not `crun`: crun refuses hybrid cgroup
 * hosts. The rlimits are given: podman's default `nofile` (1048576) is above a host's usual hard
 * limit, which runc then fails to set ("error setting rlimit type 7").
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { cacheDir } from './rootfs.js';

/** What `fixtures/scenario.mjs` prints. */
export interface ScenarioResult {
  started: boolean;
  workAcknowledged: boolean;
  error?: { name: string; code?: string; reason?: string; message: string };
  attacks?: {
    tmpInWorker: boolean;
    secretSeen: boolean;
    otherSessionSeen: boolean;
    loopbackReached: boolean;
    processesStarted: number;
    tmpMiBWritten: number;
  };
  warnings: string[];
  /** Whether the worker logged that its sessions run in bubblewrap (informative; the message may change). */
  sandboxed: boolean;
  outputs?: string[];
}

export interface RowRun {
  result: ScenarioResult;
  seconds: number;
  argv: string[];
  stderr: string;
}

export const PODMAN_GLOBAL = (): string[] => [
  '--runtime',
  'runc',
  '--root',
  path.join(cacheDir(), 'podman', 'root'),
  '--runroot',
  path.join(cacheDir(), 'podman', 'run'),
];

/** At or below the host's hard limits (a runtime default above them fails the container's start). */
export const ULIMITS = ['--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=4096:4096'];

export interface RowSpec {
  name: string;
  rootfs: string;
  app: string;
  /** The row's security flags. */
  flags: string[];
  /** Arguments of the scenario (`sandbox=none`, ...). */
  scenarioArgs: string[];
  secret: string;
  timeoutMs: number;
}

/** Containers of earlier runs whose test process is gone (a killed run leaves its rows running). */
export async function removeStaleContainers(): Promise<void> {
  const names = await new Promise<string[]>((resolve) => {
    let out = '';
    const child = spawn('podman', [...PODMAN_GLOBAL(), 'ps', '-a', '--format', '{{.Names}}'], { stdio: ['ignore', 'pipe', 'ignore'] });
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.once('error', () => resolve([]));
    child.once('exit', () => resolve(out.split('\n').filter(Boolean)));
  });
  const stale = names.filter((n) => {
    // A row is named maw-<row>-<pid>; a launcher test's session maw-launch-<pid>-<work id>.
    const pid = Number((/^maw-launch-(\d+)-/.exec(n) ?? /^maw-.+-(\d+)$/.exec(n))?.[1]);
    if (!Number.isInteger(pid) || pid === process.pid) return false;
    try {
      process.kill(pid, 0);
      return false;
    } catch {
      return true;
    }
  });
  if (stale.length === 0) return;
  await new Promise<void>((resolve) =>
    spawn('podman', [...PODMAN_GLOBAL(), 'rm', '-f', '-t', '0', ...stale], { stdio: 'ignore' })
      .once('exit', () => resolve())
      .once('error', () => resolve()),
  );
}

/** Run one row; rejects when podman itself fails or the scenario prints no JSON line. */
export function runRow(spec: RowSpec): Promise<RowRun> {
  const name = `maw-${spec.name}-${process.pid}`;
  const argv = [
    ...PODMAN_GLOBAL(),
    'run',
    '--rm',
    '--name',
    name,
    '--network',
    'none',
    ...ULIMITS,
    // A flag: the root is the first positional argument, where an image would be.
    '--rootfs',
    '-v',
    `${spec.app}:/opt/app:ro`,
    '--tmpfs',
    '/work:rw,size=512m,mode=1777',
    '--workdir',
    '/work',
    '-e',
    `MAW_CONTAINER_SECRET=${spec.secret}`,
    ...spec.flags,
    `${spec.rootfs}:O`,
    '/usr/local/bin/node',
    '/opt/app/scenario.mjs',
    'root=/work',
    ...spec.scenarioArgs,
  ];
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const child = spawn('podman', argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      // The container, not only the client: `podman rm -f` stops and removes it.
      spawn('podman', [...PODMAN_GLOBAL(), 'rm', '-f', '-t', '0', name], { stdio: 'ignore' }).once('exit', () => child.kill('SIGKILL'));
    }, spec.timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const line = stdout
        .split('\n')
        .reverse()
        .find((l) => l.startsWith('{'));
      if (timedOut || !line) {
        const why = timedOut ? `timed out after ${spec.timeoutMs} ms` : `exited with ${signal ?? code} and no JSON line`;
        reject(
          new Error(
            `row ${spec.name}: podman ${why}\n$ podman ${argv.join(' ')}\nstdout: ${stdout.slice(-2000)}\nstderr: ${stderr.slice(-4000)}`,
          ),
        );
        return;
      }
      resolve({ result: JSON.parse(line) as ScenarioResult, seconds, argv, stderr });
    });
  });
}

/** `podman <args>` under the suite's storage: its stdout; rejects naming the command and its stderr. */
export function podmanOutput(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('podman', [...PODMAN_GLOBAL(), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.once('error', reject);
    child.once('exit', (code, signal) =>
      code === 0 ? resolve(stdout) : reject(new Error(`podman ${args.join(' ')} exited with ${signal ?? code}: ${stderr.slice(-2000)}`)),
    );
  });
}
