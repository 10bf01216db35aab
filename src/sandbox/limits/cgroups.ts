import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { coerceError } from '../../errors.js';
import type { ResolvedSandboxLimits } from './limits.js';
import type { CgroupEntry } from '../launcher.js';

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
 * `<pid>` is the worker's process id: a session cgroup whose worker is gone is a leftover, which
 * {@link sweepSandboxCgroups} kills and removes (at the next start and in `recover`). The sandbox
 * enters its cgroup before anything runs in it: the shell that execs bubblewrap moves itself into
 * each hierarchy first (see `wrapper.ts`).
 */

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

const CONTROLLERS: readonly CgroupController[] = ['memory', 'pids', 'cpu'];
const DEFAULT_ROOT = '/sys/fs/cgroup';
/** The v1 CPU shares of a session beside its siblings, and the scale v2 weights map onto. */
const V1_SHARES_PER_WEIGHT = 1024 / 100;
/** Milliseconds a killed cgroup has to empty before it is left to the next sweep. */
const EMPTY_WAIT_MS = 5_000;
/** The longest pause between two looks at a cgroup that is emptying. */
const EMPTY_POLL_MAX_MS = 20;

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
  let selfCgroup: string;
  try {
    selfCgroup = facts.selfCgroup ?? fs.readFileSync('/proc/self/cgroup', 'utf8');
  } catch (e) {
    return { kind: 'none', problem: `/proc/self/cgroup cannot be read (${coerceError(e).message})`, fix: CGROUP_FIX };
  }
  const own = ownCgroups(selfCgroup);
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
  let selfCgroup: string;
  try {
    selfCgroup = facts.selfCgroup ?? fs.readFileSync('/proc/self/cgroup', 'utf8');
  } catch (e) {
    return { kind: 'none', problem: `/proc/self/cgroup cannot be read (${coerceError(e).message})`, fix: CGROUP_FIX };
  }
  const own = ownCgroups(selfCgroup);
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

/** Counters of the limits the kernel enforced in one session cgroup, since it was made. */
export interface CgroupCounters {
  /** Processes the OOM killer killed. */
  oomKills: number;
  /** Forks refused at `pids.max`. */
  pidsRefused: number;
}

/**
 * One session's cgroup (one folder per controller on v1). Made with its limits written before any
 * process enters it; {@link destroy} kills what is left in it and removes it.
 */
export class SessionCgroup {
  readonly #support: Extract<CgroupSupport, { kind: 'v1' | 'v2' }>;
  readonly #dirs: Partial<Record<CgroupController, string>>;

  private constructor(support: Extract<CgroupSupport, { kind: 'v1' | 'v2' }>, dirs: Partial<Record<CgroupController, string>>) {
    this.#support = support;
    this.#dirs = dirs;
  }

  /** Make the cgroup of one session and write its limits. Throws when the cgroupfs refuses. */
  static create(
    support: Extract<CgroupSupport, { kind: 'v1' | 'v2' }>,
    sessionKey: string,
    limits: ResolvedSandboxLimits,
    pid: number = process.pid,
  ): SessionCgroup {
    const leaf = `${pid}-${sessionKey.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 80)}`;
    const dirs: Partial<Record<CgroupController, string>> = {};
    const made = new Set<string>();
    for (const [c, parent] of Object.entries(support.parents) as Array<[CgroupController, string]>) {
      const dir = path.join(parent, leaf);
      if (!made.has(dir)) fs.mkdirSync(dir);
      made.add(dir);
      dirs[c] = dir;
    }
    const cgroup = new SessionCgroup(support, dirs);
    try {
      cgroup.#writeLimits(limits);
    } catch (e) {
      void cgroup.destroy();
      throw e;
    }
    return cgroup;
  }

  /** The `cgroup.procs` files a process writes its pid to, to enter this cgroup. */
  get procsFiles(): string[] {
    return [...new Set(Object.values(this.#dirs))].map((d) => path.join(d, 'cgroup.procs'));
  }

  /** The writes that put the sandbox's spawn wrapper (a shell) into this cgroup (see `wrapper.ts`). */
  get entries(): CgroupEntry[] {
    const v1 = this.#support.kind === 'v1';
    return this.dirs.map((d) => ({ file: path.join(d, v1 ? 'tasks' : 'cgroup.procs'), moves: v1 ? 'self' : 'process' }));
  }

  /** The folders of this cgroup (one per hierarchy). */
  get dirs(): string[] {
    return [...new Set(Object.values(this.#dirs))];
  }

  /** Set this session's CPU weight beside the other sessions' (v2 scale); nothing without a CPU cgroup. Throws when refused. */
  setCpuWeight(weight: number): void {
    if (this.#dirs.cpu !== undefined) writeCpuWeight(this.#dirs.cpu, this.#support.kind, weight);
  }

  /** What the kernel counted so far; a counter it does not offer reads 0. */
  counters(): CgroupCounters {
    const v2 = this.#support.kind === 'v2';
    const memory = this.#dirs.memory;
    const pids = this.#dirs.pids;
    return {
      oomKills: memory ? keyed(path.join(memory, v2 ? 'memory.events' : 'memory.oom_control'), 'oom_kill') : 0,
      pidsRefused: pids ? keyed(path.join(pids, 'pids.events'), 'max') : 0,
    };
  }

  /** Kill every process in the cgroup, wait (bounded) until it is empty, and remove it. Never throws. */
  async destroy(): Promise<boolean> {
    return killAndRemove(this.dirs, this.#support.kind);
  }

  #writeLimits(l: ResolvedSandboxLimits): void {
    const { memory, pids, cpu } = this.#dirs;
    if (this.#support.kind === 'v2') {
      if (memory && l.memoryMiB !== null) {
        fs.writeFileSync(path.join(memory, 'memory.max'), String(l.memoryMiB * 1024 * 1024));
        writeIfPresent(path.join(memory, 'memory.swap.max'), '0');
        fs.writeFileSync(path.join(memory, 'memory.oom.group'), '1');
      }
      if (pids && l.maxProcesses !== null) fs.writeFileSync(path.join(pids, 'pids.max'), String(l.maxProcesses));
      if (cpu && l.cpuWeight !== null) writeCpuWeight(cpu, 'v2', 100);
      return;
    }
    if (memory && l.memoryMiB !== null) {
      const bytes = String(l.memoryMiB * 1024 * 1024);
      fs.writeFileSync(path.join(memory, 'memory.limit_in_bytes'), bytes);
      // With swap accounting, memory plus swap gets the same bound, so the sandbox cannot swap past it.
      writeIfPresent(path.join(memory, 'memory.memsw.limit_in_bytes'), bytes);
    }
    if (pids && l.maxProcesses !== null) fs.writeFileSync(path.join(pids, 'pids.max'), String(l.maxProcesses));
    if (cpu && l.cpuWeight !== null) writeCpuWeight(cpu, 'v1', 100);
  }
}

/**
 * Kill and remove the session cgroups of workers that are gone (their `<pid>` names no live
 * process) under every `maw-<key>` folder of this state folder anywhere in the hierarchy (the
 * worker that left them may have run in another cgroup than this process). Returns the folders
 * removed. Never throws; a cgroup that does not empty in time is left for the next sweep.
 */
export async function sweepSandboxCgroups(
  stateDir: string,
  facts: Pick<CgroupHostFacts, 'root' | 'pid'> & { alive?: (pid: number) => boolean } = {},
): Promise<string[]> {
  const root = facts.root ?? DEFAULT_ROOT;
  const self = facts.pid ?? process.pid;
  const alive = facts.alive ?? processAlive;
  const name = cgroupParentName(stateDir);
  const v2 = fs.existsSync(path.join(root, 'cgroup.controllers'));
  const tops = v2 ? [root] : CONTROLLERS.map((c) => path.join(root, c)).filter((d) => fs.existsSync(d));
  const leftovers = new Map<string, string[]>();
  for (const top of tops) {
    for (const parent of await findNamed(top, name)) {
      for (const entry of safeReaddir(parent)) {
        if (!entry.isDirectory()) continue;
        const owner = /^(\d+)-/.exec(entry.name);
        if (!owner) continue;
        const pid = Number(owner[1]);
        if (pid === self || alive(pid)) continue;
        const key = `${pid}\0${entry.name}`;
        leftovers.set(key, [...(leftovers.get(key) ?? []), path.join(parent, entry.name)]);
      }
    }
  }
  const removed: string[] = [];
  for (const dirs of leftovers.values()) {
    if (await killAndRemove(dirs, v2 ? 'v2' : 'v1')) removed.push(...dirs);
  }
  return removed;
}

/**
 * Remove the worker's `maw-<key>` parents once it has stopped and its sessions' cgroups are gone:
 * a parent that still holds a session's cgroup (the kernel refuses to remove it) is left, as is
 * anything the setup changed in the worker's own cgroup. Returns the folders removed; never throws.
 */
export function releaseSandboxCgroups(support: CgroupSupport): string[] {
  if (support.kind === 'none') return [];
  const removed: string[] = [];
  for (const parent of new Set(Object.values(support.parents))) {
    try {
      fs.rmdirSync(parent);
      removed.push(parent);
    } catch (e) {
      // A cgroupfs answers EBUSY for a cgroup with children; a plain folder standing in for one (a
      // test's) is empty but for its control files once it has no child folder.
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' || safeReaddir(parent).some((d) => d.isDirectory())) continue;
      try {
        fs.rmSync(parent, { recursive: true, force: true });
        removed.push(parent);
      } catch {
        // Left as it is.
      }
    }
  }
  return removed;
}

/**
 * Folders named `name` under `top`, searched breadth-first to a bounded depth and count. The
 * folders of one level are read at once, without blocking the event loop: a host's hierarchy can
 * hold thousands of cgroups, and a synchronous walk of them held up a worker's start by 100 ms.
 */
async function findNamed(top: string, name: string): Promise<string[]> {
  const found: string[] = [];
  let level = [top];
  let visited = 0;
  for (let depth = 0; depth < 8 && level.length > 0 && visited < MAX_WALKED_FOLDERS; depth++) {
    const next: string[] = [];
    for (let i = 0; i < level.length; i += READS_AT_ONCE) {
      const listings = await Promise.all(level.slice(i, i + READS_AT_ONCE).map((dir) => readdirOrEmpty(dir)));
      listings.forEach((entries, k) => {
        const dir = level[i + k]!;
        for (const entry of entries) {
          if (!entry.isDirectory()) continue;
          visited++;
          const child = path.join(dir, entry.name);
          if (entry.name === name) found.push(child);
          else next.push(child);
        }
      });
    }
    level = next;
  }
  return found;
}

/** Most folders one sweep looks at, and how many of them it reads at a time. */
const MAX_WALKED_FOLDERS = 20_000;
const READS_AT_ONCE = 32;

async function readdirOrEmpty(dir: string): Promise<fs.Dirent[]> {
  try {
    return await fs.promises.readdir(dir, { withFileTypes: true });
  } catch {
    return [];
  }
}

/**
 * The pause before the next look at a cgroup that is emptying, after `looks` looks: 1 ms, doubling
 * up to {@link EMPTY_POLL_MAX_MS}. A session's cgroup often still lists its sandbox's last process
 * for a moment after the sandbox's end was seen, and the next session waits for the removal.
 */
export function emptyPollMs(looks: number): number {
  return Math.min(EMPTY_POLL_MAX_MS, 2 ** Math.max(0, looks - 1));
}

async function killAndRemove(dirs: string[], kind: 'v1' | 'v2'): Promise<boolean> {
  const deadline = Date.now() + EMPTY_WAIT_MS;
  let looks = 0;
  for (const dir of dirs) {
    if (kind === 'v2') writeIfPresent(path.join(dir, 'cgroup.kill'), '1');
  }
  for (;;) {
    let left = 0;
    for (const dir of dirs) {
      for (const pid of readWords(path.join(dir, 'cgroup.procs'))) {
        try {
          process.kill(Number(pid), 'SIGKILL');
          left++;
        } catch {
          // Gone already.
        }
      }
    }
    if (left === 0 || Date.now() > deadline) break;
    await sleep(emptyPollMs(++looks));
  }
  let removedAll = true;
  for (const dir of dirs) {
    for (;;) {
      try {
        fs.rmdirSync(dir);
        break;
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') break;
        // A cgroupfs never answers ENOTEMPTY (its control files do not count); a plain folder
        // standing in for one (a test's) does, and is removed with its files.
        if (code === 'ENOTEMPTY') {
          fs.rmSync(dir, { recursive: true, force: true });
          break;
        }
        // EBUSY: the last processes are still exiting.
        if (code === 'EBUSY' && Date.now() < deadline) {
          await sleep(emptyPollMs(++looks));
          continue;
        }
        removedAll = false;
        break;
      }
    }
  }
  return removedAll;
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

function readWords(file: string): string[] {
  try {
    return fs.readFileSync(file, 'utf8').split(/\s+/).filter(Boolean);
  } catch {
    return [];
  }
}

/** The number after `key` in a `key value` per line file (`memory.events`, `pids.events`). */
function keyed(file: string, key: string): number {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return 0;
  }
  const m = new RegExp(`^${key}\\s+(\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

function writeIfPresent(file: string, value: string): void {
  try {
    fs.writeFileSync(file, value);
  } catch {
    // Not offered by this kernel (no swap accounting, no cgroup.kill before Linux 5.14).
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

function safeReaddir(dir: string): fs.Dirent[] {
  try {
    return fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
