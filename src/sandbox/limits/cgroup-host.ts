/**
 * A cgroup per session sandbox, so that the kernel bounds each one's memory, processes and CPU
 * share, and an OOM in one kills in that sandbox only.
 *
 * Layout (`<own>` is the cgroup the worker runs in, from `/proc/self/cgroup`; `<key>` is a short
 * hash of the worker's state folder, so a worker recognises its own leftovers):
 *
 * ```
 * cgroup v2 (a delegated subtree: the worker may write <own>)
 *   <own>/worker/                 the worker's own processes, moved here at start ("no internal
 *                                 processes": a cgroup whose children have controllers holds none)
 *   <own>/maw-<key>/              cpu.weight = limits.cpuWeight (against worker/'s 100)
 *   <own>/maw-<key>/<pid>-<sid>/  one session: memory.max, memory.swap.max 0, memory.oom.group 1,
 *                                 pids.max, cpu.weight 100
 * cgroup v1 (root): the same maw-<key>/<pid>-<sid> under <own> of each of the memory, pids and
 *   cpu hierarchies (memory.limit_in_bytes and memsw, pids.max, cpu.shares), the worker staying
 *   where it is (v1 allows tasks beside child cgroups).
 * ```
 *
 * While a sandbox starts, the parent's weight rises to the worker's and the starting session's
 * leaf outweighs its siblings (see `start-weight.ts`).
 *
 * This file finds the hierarchy and makes the `maw-<key>` parent ({@link setUpSandboxCgroups}), or
 * says without writing what it would find ({@link probeCgroupSupport}, for `doctor`). A session's
 * leaf is `session-cgroup.ts`; `<pid>` is the worker's process id, so a session cgroup whose worker
 * is gone is a leftover, which `cgroup-sweep.ts` kills and removes (at the next start and in
 * `recover`). The sandbox enters its cgroup before anything runs in it: the shell that execs
 * bubblewrap moves itself into each hierarchy first (see `wrapper.ts`).
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { coerceError } from '../../errors.js';
import type { ResolvedSandboxLimits } from './limits.js';

/** A cgroup controller a sandbox limit needs: memory, processes (pids) or CPU share. */
export type CgroupController = 'memory' | 'pids' | 'cpu';

/** Where the worker can make session cgroups, or why not (with the fix). */
export type CgroupSupport =
  | {
      kind: 'v2' | 'v1';
      /** The cgroupfs mount point (`/sys/fs/cgroup`, or a test's folder). */
      root: string;
      /** The `maw-<key>` folder per controller (v2: the same folder for all). */
      parents: Partial<Record<CgroupController, string>>;
    }
  | { kind: 'none'; problem: string; fix: string };

/** What the worker knows of its host's cgroups; each field defaults to the real host (tests set them). */
export interface CgroupHostFacts {
  /** The cgroupfs mount point. Default `/sys/fs/cgroup`. */
  root?: string;
  /** The text of `/proc/self/cgroup`. Default: read. */
  selfCgroup?: string;
  /** Whether the worker runs as root. Default: `process.getuid() === 0`. */
  isRoot?: boolean;
  /** The worker's pid, naming its session cgroups. Default `process.pid`. */
  pid?: number;
}

/** Every controller a sandbox limit may need. */
export const CONTROLLERS: readonly CgroupController[] = ['memory', 'pids', 'cpu'];
/** Where the cgroupfs is mounted unless a test says otherwise. */
export const DEFAULT_ROOT = '/sys/fs/cgroup';
/** The v1 CPU shares of a session beside its siblings, and the scale v2 weights map onto. */
const V1_SHARES_PER_WEIGHT = 1024 / 100;

/** The fix said with every cgroup problem: how to give the worker a cgroup it may manage. */
export const CGROUP_FIX =
  'give the worker a cgroup it may manage: on cgroup v2, delegate a subtree to it (systemd: Delegate=yes in its unit, ' +
  'or systemd-run --user -p Delegate=yes; in a container, a private cgroup namespace with a writable /sys/fs/cgroup); on cgroup v1, run it as root. ' +
  "In a Kubernetes pod no cgroup is the worker's to manage: the pod's resources.limits (memory, cpu) and the kubelet's podPidsLimit bound all its sessions together";

/** `maw-` and a short hash of the state folder: the name of this worker's sandbox cgroups' parent. */
export function cgroupParentName(stateDir: string): string {
  return `maw-${createHash('sha256').update(path.resolve(stateDir)).digest('hex').slice(0, 12)}`;
}

/** Which controllers the set limits need. */
export function neededControllers(limits: ResolvedSandboxLimits): CgroupController[] {
  return [
    ...(limits.memoryMiB !== null ? (['memory'] as const) : []),
    ...(limits.maxProcesses !== null ? (['pids'] as const) : []),
    ...(limits.cpuWeight !== null ? (['cpu'] as const) : []),
  ];
}

/**
 * Find the cgroup hierarchy, check the worker may manage its own cgroup, and make the `maw-<key>`
 * parent (on v2, moving the worker's processes into `worker/` first). Synchronous: a handful of
 * small cgroupfs reads and writes, once per worker.
 */
export function setUpSandboxCgroups(limits: ResolvedSandboxLimits, stateDir: string, facts: CgroupHostFacts = {}): CgroupSupport {
  const wanted = neededControllers(limits);
  if (wanted.length === 0) return { kind: 'none', problem: 'no limit needs a cgroup', fix: '' };
  const root = facts.root ?? DEFAULT_ROOT;
  const name = cgroupParentName(stateDir);
  const own = readOwnCgroups(facts);
  if (!(own instanceof Map)) return own;
  try {
    if (fs.existsSync(path.join(root, 'cgroup.controllers'))) return setUpV2(root, own.get('') ?? '/', name, wanted, limits);
    return setUpV1(root, own, name, wanted, limits, facts.isRoot ?? process.getuid?.() === 0);
  } catch (e) {
    return { kind: 'none', problem: `the worker could not make its sandboxes' cgroup (${coerceError(e).message})`, fix: CGROUP_FIX };
  }
}

/** Why the worker may not manage the v2 cgroup `dir` (its procs and subtree control not writable), or undefined. */
function notDelegated(dir: string): Extract<CgroupSupport, { kind: 'none' }> | undefined {
  for (const f of ['cgroup.procs', 'cgroup.subtree_control']) {
    try {
      fs.accessSync(path.join(dir, f), fs.constants.W_OK);
    } catch {
      return {
        kind: 'none',
        problem: `cgroup v2: the worker's cgroup ${dir} is not delegated to it (${f} is not writable)`,
        fix: CGROUP_FIX,
      };
    }
  }
  return undefined;
}

function setUpV2(root: string, own: string, name: string, wanted: CgroupController[], limits: ResolvedSandboxLimits): CgroupSupport {
  const dir = path.join(root, own);
  const available = readWords(path.join(dir, 'cgroup.controllers'));
  const usable = wanted.filter((c) => available.includes(c));
  if (usable.length === 0) {
    return { kind: 'none', problem: `cgroup v2: ${dir} offers none of the ${wanted.join(', ')} controllers`, fix: CGROUP_FIX };
  }
  const undelegated = notDelegated(dir);
  if (undelegated !== undefined) return undelegated;
  const enabled = readWords(path.join(dir, 'cgroup.subtree_control'));
  const enable = usable.filter((c) => !enabled.includes(c));
  if (enable.length > 0) {
    // A cgroup that hands controllers to its children holds no process itself: the worker (and
    // anything else in its cgroup) moves into a leaf of its own first.
    // The host's root cgroup is exempt from that rule (and lists every process of the host): it
    // is told apart from a container's namespace root by having no cgroup.type.
    const hostRoot = own === '/' && !fs.existsSync(path.join(dir, 'cgroup.type'));
    const pids = hostRoot ? [] : readWords(path.join(dir, 'cgroup.procs'));
    if (pids.length > 0) {
      const leaf = path.join(dir, 'worker');
      fs.mkdirSync(leaf, { recursive: true });
      for (const pid of pids) writeIgnoringGone(path.join(leaf, 'cgroup.procs'), pid);
    }
    fs.writeFileSync(path.join(dir, 'cgroup.subtree_control'), enable.map((c) => `+${c}`).join(' '));
  }
  const parent = path.join(dir, name);
  fs.mkdirSync(parent, { recursive: true });
  fs.writeFileSync(path.join(parent, 'cgroup.subtree_control'), usable.map((c) => `+${c}`).join(' '));
  if (usable.includes('cpu') && limits.cpuWeight !== null) writeCpuWeight(parent, 'v2', limits.cpuWeight);
  return { kind: 'v2', root, parents: Object.fromEntries(usable.map((c) => [c, parent])) };
}

function setUpV1(
  root: string,
  own: Map<string, string>,
  name: string,
  wanted: CgroupController[],
  limits: ResolvedSandboxLimits,
  isRoot: boolean,
): CgroupSupport {
  if (!CONTROLLERS.some((c) => fs.existsSync(path.join(root, c)))) {
    return { kind: 'none', problem: `no cgroup hierarchy at ${root}`, fix: CGROUP_FIX };
  }
  if (!isRoot) return { kind: 'none', problem: 'cgroup v1 lets only root make cgroups, and the worker is not root', fix: CGROUP_FIX };
  const parents: Partial<Record<CgroupController, string>> = {};
  for (const c of wanted) {
    const mount = path.join(root, c);
    const ownPath = own.get(c);
    if (ownPath === undefined || !fs.existsSync(mount)) continue;
    const parent = path.join(mount, ownPath, name);
    fs.mkdirSync(parent, { recursive: true });
    if (c === 'cpu' && limits.cpuWeight !== null) writeCpuWeight(parent, 'v1', limits.cpuWeight);
    parents[c] = parent;
  }
  if (Object.keys(parents).length === 0) {
    return { kind: 'none', problem: `cgroup v1: none of the ${wanted.join(', ')} controllers is mounted under ${root}`, fix: CGROUP_FIX };
  }
  return { kind: 'v1', root, parents };
}

/**
 * Write a cgroup's CPU weight on the v2 scale (the worker's is 100): `cpu.weight` on v2,
 * `cpu.shares` (1024 per 100) on v1. Throws when the cgroupfs refuses.
 */
export function writeCpuWeight(dir: string, kind: 'v1' | 'v2', weight: number): void {
  if (kind === 'v2') fs.writeFileSync(path.join(dir, 'cpu.weight'), String(weight));
  else fs.writeFileSync(path.join(dir, 'cpu.shares'), String(Math.max(2, Math.round(weight * V1_SHARES_PER_WEIGHT))));
}

/**
 * What {@link setUpSandboxCgroups} would find, without writing anything (for `doctor`): which
 * hierarchy, and which controllers the worker could use for its sandboxes.
 */
export function probeCgroupSupport(
  facts: CgroupHostFacts = {},
): { kind: 'v1' | 'v2'; controllers: CgroupController[] } | { kind: 'none'; problem: string; fix: string } {
  const root = facts.root ?? DEFAULT_ROOT;
  const own = readOwnCgroups(facts);
  if (!(own instanceof Map)) return own;
  if (fs.existsSync(path.join(root, 'cgroup.controllers'))) {
    const dir = path.join(root, own.get('') ?? '/');
    const undelegated = notDelegated(dir);
    if (undelegated !== undefined) return undelegated;
    const available = readWords(path.join(dir, 'cgroup.controllers'));
    return { kind: 'v2', controllers: CONTROLLERS.filter((c) => available.includes(c)) };
  }
  if (!CONTROLLERS.some((c) => fs.existsSync(path.join(root, c))))
    return { kind: 'none', problem: `no cgroup hierarchy at ${root}`, fix: CGROUP_FIX };
  if (!(facts.isRoot ?? process.getuid?.() === 0)) {
    return { kind: 'none', problem: 'cgroup v1 lets only root make cgroups, and the worker is not root', fix: CGROUP_FIX };
  }
  return { kind: 'v1', controllers: CONTROLLERS.filter((c) => own.has(c) && fs.existsSync(path.join(root, c))) };
}

/** The worker's own cgroups by controller (`''` for v2), from `/proc/self/cgroup`, or why they cannot be read. */
function readOwnCgroups(facts: CgroupHostFacts): Map<string, string> | { kind: 'none'; problem: string; fix: string } {
  try {
    return ownCgroups(facts.selfCgroup ?? fs.readFileSync('/proc/self/cgroup', 'utf8'));
  } catch (e) {
    return { kind: 'none', problem: `/proc/self/cgroup cannot be read (${coerceError(e).message})`, fix: CGROUP_FIX };
  }
}

/** The worker's cgroup per controller from `/proc/self/cgroup`; `''` is the v2 (unified) one. */
function ownCgroups(text: string): Map<string, string> {
  const own = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    const names = m[1] === '' ? [''] : m[1]!.split(',');
    for (const n of names) own.set(n, m[2]!);
  }
  return own;
}

/** The whitespace-separated words of a cgroupfs file (pids, controllers); none when it cannot be read. */
export function readWords(file: string): string[] {
  try {
    return fs.readFileSync(file, 'utf8').split(/\s+/).filter(Boolean);
  } catch {
    return [];
  }
}

function writeIgnoringGone(file: string, pid: string): void {
  try {
    fs.writeFileSync(file, pid);
  } catch (e) {
    // A process that exited since the listing.
    if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
  }
}
