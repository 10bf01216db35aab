import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { feedSeccomp, seccompArgs } from './bwrap-features.js';

/**
 * The one way a sandbox starts: a session's, and every probe's (the worker's start check and each
 * `doctor` row start a session's sandbox through the same path). It owns the descriptors bubblewrap
 * gets, the spawn wrapper that bounds the sandbox before bubblewrap runs, and the start timeout.
 *
 * Descriptors of the child:
 *
 * | fd   | what                                                                       |
 * |------|----------------------------------------------------------------------------|
 * | 0-2  | stdin, stdout, stderr of the sandbox's first command (the tool host)       |
 * | 3    | bubblewrap's `--info-fd`: the host-side pid of the sandbox's init           |
 * | 4    | the seccomp filter (`--seccomp 4`), when one is built for this architecture |
 * | last | a Node IPC channel, when the command hands a listener back (egress)         |
 *
 * The wrapper is a fixed bash script; everything it is told (cgroup files, limits, the program)
 * arrives as its arguments, never spliced into its text. In order it: moves itself into each of
 * the session's cgroups (a refused write ends it: nothing runs outside the cgroup it was meant
 * for), raises its OOM score (the kernel kills a sandbox's process before the worker's), turns
 * core files off, sets open files (soft and hard, so the agent cannot raise them), closes every
 * descriptor it inherited beyond the child's own (one the worker holds without close-on-exec
 * would otherwise reach the agent), and execs bubblewrap, under `nice` where the sandbox's CPU
 * weight is held by its niceness instead of a cgroup.
 */

/** Milliseconds a sandbox's first command may take to say it is ready before the start is given up. */
export const SANDBOX_START_TIMEOUT_MS = 20_000;

/** The OOM score adjustment of every sandboxed process (the worker keeps its own, 0 by default). */
export const SANDBOX_OOM_SCORE_ADJ = 1000;

/** Exit status of the wrapper when the sandbox could not be bounded as asked. */
export const LIMIT_SETUP_EXIT = 125;

/**
 * One write that puts the wrapper's shell into a cgroup. `self`: `0` into a cgroup v1 `tasks`
 * file, which moves the writing thread itself (the shell has no other thread): the kernel then
 * takes no lock over every thread group of the host, where moving a whole process waits for an
 * RCU grace period on every sandbox's start. `process`: the shell's pid into `cgroup.procs`
 * (cgroup v2, which moves only whole processes between its domain cgroups).
 */
export interface CgroupEntry {
  file: string;
  moves: 'self' | 'process';
}

/** How the wrapper bounds a sandbox before bubblewrap starts; everything it starts inherits these. */
export interface LaunchBounds {
  cgroupEntries: readonly CgroupEntry[];
  /** Open files per process (soft and hard); `null`: as inherited. */
  openFiles: number | null;
  /** The niceness the sandbox runs at, with the `nice` program that sets it; `null`: inherited. */
  nice: { level: number; program: string } | null;
}

/** What to start: bubblewrap, its arguments for the view, the filter and the bounds. */
export interface SandboxLaunch {
  bwrap: string;
  /** `bwrapArgs(view)`: bubblewrap's options and, after `--`, the sandbox's first command. */
  args: readonly string[];
  seccomp: Buffer | undefined;
  bounds: LaunchBounds;
  /** Give the command a Node IPC channel as its last descriptor. */
  channel: boolean;
}

/** No bounds: what a sandbox gets where nothing is asked. */
export const NO_BOUNDS: LaunchBounds = Object.freeze({ cgroupEntries: [], openFiles: null, nice: null });

const WRAPPER = [
  'first=$1 files=$2 level=$3 nicer=$4 n=$5; shift 5',
  'while [ "$n" -gt 0 ]; do',
  '  if [ "$1" = self ]; then m=0; else m=$$; fi',
  `  echo "$m" > "$2" || { echo "could not enter the sandbox's cgroup ($2)" >&2; exit ${LIMIT_SETUP_EXIT}; }`,
  '  shift 2; n=$((n - 1))',
  'done',
  `echo ${SANDBOX_OOM_SCORE_ADJ} > /proc/$$/oom_score_adj 2>/dev/null`,
  'ulimit -c 0 2>/dev/null',
  `if [ "$files" != - ]; then ulimit -n "$files" || exit ${LIMIT_SETUP_EXIT}; fi`,
  // No redirection on this loop: bash would keep stderr's copy on a descriptor the loop closes.
  'for p in /proc/$$/fd/*; do d=${p##*/}; if [ "$d" -ge "$first" ]; then eval "exec $d>&-"; fi; done',
  'if [ "$level" != - ]; then exec "$nicer" -n "$level" "$@"; fi',
  'exec "$@"',
].join('\n');

/** The wrapper's arguments (after its `$0`) for `bounds`, with `first` the first descriptor it closes. */
export function wrapperArguments(bounds: LaunchBounds, first: number): string[] {
  const files = bounds.openFiles === null ? '-' : String(Math.min(bounds.openFiles, openFilesHardLimit() ?? bounds.openFiles));
  const entries = bounds.cgroupEntries.flatMap((e) => [e.moves, e.file]);
  return [
    String(first),
    files,
    bounds.nice === null ? '-' : String(bounds.nice.level),
    bounds.nice === null ? '-' : bounds.nice.program,
    String(bounds.cgroupEntries.length),
    ...entries,
  ];
}

/** Run `command` with `args` through the wrapper (bash), bounded by `bounds`. For the launcher and its tests. */
export function spawnWrapped(
  command: string,
  args: readonly string[],
  bounds: LaunchBounds,
  stdio: Array<'pipe' | 'ipc' | 'ignore'>,
): ChildProcess {
  // --norc: with a socket for stdin bash takes itself for a remote shell and would run the worker
  // user's ~/.bashrc. bubblewrap's own processes (the sandbox's init among them, whose /proc entry
  // the agent can read) start with an empty environment.
  return spawn('/bin/bash', ['--norc', '-c', WRAPPER, 'maw-sandbox', ...wrapperArguments(bounds, stdio.length), command, ...args], {
    stdio,
    env: {},
  });
}

/**
 * A started sandbox: its process (the wrapper, then bubblewrap) and the host-side pid of its
 * init once bubblewrap reported it. Killing that init ends every process of the sandbox.
 */
export class LaunchedSandbox {
  readonly child: ChildProcess;
  #init: number | undefined;

  constructor(launch: SandboxLaunch) {
    const stdio: Array<'pipe' | 'ipc'> = Array.from({ length: launch.seccomp === undefined ? 4 : 5 }, () => 'pipe');
    let args = [...launch.args];
    if (launch.channel) {
      stdio.push('ipc');
      args = withChannelVariable(args, stdio.length - 1);
    }
    const filter = launch.seccomp === undefined ? [] : seccompArgs(4);
    this.child = spawnWrapped(launch.bwrap, ['--info-fd', '3', ...filter, ...args], launch.bounds, stdio);
    if (launch.seccomp !== undefined) feedSeccomp(this.child.stdio[4] as NodeJS.WritableStream | null, launch.seccomp);
    let info = '';
    const infoStream = this.child.stdio[3] as NodeJS.ReadableStream | null;
    infoStream?.on('data', (d: Buffer) => {
      info += d.toString('utf8');
      const m = /"child-pid"\s*:\s*(\d+)/.exec(info);
      if (m && this.#init === undefined) this.#init = Number(m[1]);
    });
    infoStream?.on('error', () => {});
  }

  /** The host-side pid of the sandbox's init, once bubblewrap reported it. */
  get sandboxPid(): number | undefined {
    return this.#init;
  }
}

/**
 * bubblewrap's arguments with `NODE_CHANNEL_FD` set inside, just before the `--` that ends
 * bubblewrap's options (after its `--clearenv`): bubblewrap clears the environment, so the
 * variable that tells Node where its channel is must be set again inside.
 */
function withChannelVariable(args: string[], fd: number): string[] {
  const end = args.lastIndexOf('--');
  if (end < 0) return args;
  return [...args.slice(0, end), '--setenv', 'NODE_CHANNEL_FD', String(fd), ...args.slice(end)];
}

let hardLimits: { files: number | undefined; processes: number | undefined } | undefined;

/** The worker's hard limits (`/proc/self/limits`), read once; `undefined` when unlimited or unknown. */
function readHardLimits(): { files: number | undefined; processes: number | undefined } {
  if (hardLimits === undefined) {
    let text = '';
    try {
      text = fs.readFileSync('/proc/self/limits', 'utf8');
    } catch {
      // Unknown: nothing is capped.
    }
    const hard = (name: string): number | undefined => {
      const m = new RegExp(`^${name}\\s+\\S+\\s+(\\d+)`, 'm').exec(text);
      return m ? Number(m[1]) : undefined;
    };
    hardLimits = { files: hard('Max open files'), processes: hard('Max processes') };
  }
  return hardLimits;
}

/** The worker's hard limit of open files: a sandbox's is never set above it (only root may raise it). */
export function openFilesHardLimit(): number | undefined {
  return readHardLimits().files;
}

/** The worker's hard limit of processes: a sandbox's is never set above it. */
export function processesHardLimit(): number | undefined {
  return readHardLimits().processes;
}
