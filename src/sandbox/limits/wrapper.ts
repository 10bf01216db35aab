import * as fs from 'node:fs';

/**
 * The shell lines the sandbox's spawn wrapper runs before it execs bubblewrap, so that every
 * process of the sandbox starts bounded: it enters the session's cgroup (see {@link CgroupEntry};
 * a refused write ends it, so nothing runs outside the cgroup it was meant for),
 * raises its OOM score (the kernel kills a sandbox's process before the worker's; as root the
 * sandbox, which has no capability, cannot lower it again), and sets its rlimits (no core files;
 * open files, soft and hard, so the agent cannot raise them). Everything it execs inherits these.
 *
 * `ulimit -u` is not used: the kernel counts it per user across the host (the worker's own
 * processes included), so it cannot bound one sandbox; the pids cgroup does.
 */

/** The OOM score adjustment of every sandboxed process (the worker keeps its own, 0 by default). */
export const SANDBOX_OOM_SCORE_ADJ = 1000;

/** Exit status of the wrapper when the sandbox could not be bounded as asked. */
export const LIMIT_SETUP_EXIT = 125;

/**
 * One write that puts the wrapper's shell into a cgroup. `self`: `0` into a cgroup v1 `tasks`
 * file, which moves the writing thread itself (the shell has no other thread): the kernel then
 * takes no lock over every thread group of the host, where moving a whole process waits for an
 * RCU grace period, 15 to 30 ms here, on every sandbox's start. `process`: the shell's pid into
 * `cgroup.procs` (cgroup v2, which moves only whole processes between its domain cgroups).
 */
export interface CgroupEntry {
  file: string;
  moves: 'self' | 'process';
}

export function limitPrelude(opts: { entries: readonly CgroupEntry[]; openFiles: number | null }): string {
  const lines: string[] = [];
  for (const { file, moves } of opts.entries) {
    lines.push(
      `echo ${moves === 'self' ? '0' : '$$'} > ${quote(file)} || { echo ${quote(`could not enter the sandbox's cgroup (${file})`)} >&2; exit ${LIMIT_SETUP_EXIT}; }`,
    );
  }
  lines.push(`echo ${SANDBOX_OOM_SCORE_ADJ} > /proc/$$/oom_score_adj 2>/dev/null`);
  lines.push('ulimit -c 0 2>/dev/null');
  if (opts.openFiles !== null) {
    // Never above the hard limit the worker got (only root may raise it); read here, so the
    // wrapper starts no extra process to ask for it.
    const hard = openFilesHardLimit();
    const n = hard === undefined ? opts.openFiles : Math.min(opts.openFiles, hard);
    lines.push(`ulimit -n ${n} || exit ${LIMIT_SETUP_EXIT}`);
  }
  return `${lines.join('; ')}; `;
}

let hardLimit: number | undefined | null = null;

/** The worker's hard limit of open files (`/proc/self/limits`), read once; `undefined` when unlimited or unknown. */
function openFilesHardLimit(): number | undefined {
  if (hardLimit === null) {
    try {
      const m = /^Max open files\s+\S+\s+(\d+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
      hardLimit = m ? Number(m[1]) : undefined;
    } catch {
      hardLimit = undefined;
    }
  }
  return hardLimit;
}

function quote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
