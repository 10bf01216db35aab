/**
 * One session's cgroup: a leaf `<pid>-<session>` under each `maw-<key>` parent the worker set up
 * (see `cgroup-host.ts` for the layout), its memory, pids and CPU limits written before any process
 * enters it, its counters read from the kernel, and its end: every process in it killed and the
 * leaf removed.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ResolvedSandboxLimits } from './limits.js';
import type { CgroupEntry } from '../launcher.js';
import { readWords, writeCpuWeight, type CgroupController, type CgroupSupport } from './cgroup-host.js';

/** Milliseconds a killed cgroup has to empty before it is left to the next sweep. */
const EMPTY_WAIT_MS = 5_000;
/** The longest pause between two looks at a cgroup that is emptying. */
const EMPTY_POLL_MAX_MS = 20;

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
 * The pause before the next look at a cgroup that is emptying, after `looks` looks: 1 ms, doubling
 * up to {@link EMPTY_POLL_MAX_MS}. A session's cgroup often still lists its sandbox's last process
 * for a moment after the sandbox's end was seen, and the next session waits for the removal.
 */
export function emptyPollMs(looks: number): number {
  return Math.min(EMPTY_POLL_MAX_MS, 2 ** Math.max(0, looks - 1));
}

/**
 * Kill every process in one cgroup's folders (one per hierarchy), wait (at most
 * {@link EMPTY_WAIT_MS}) until they are empty, and remove them. True when every folder is gone; a
 * cgroup that does not empty in time is left for the next sweep.
 */
export async function killAndRemove(dirs: string[], kind: 'v1' | 'v2'): Promise<boolean> {
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
