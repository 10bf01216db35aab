/**
 * CPU of a benchmark child and of everything it starts (shells, sandboxes, their tool hosts),
 * from a control group of its own. A process's own rusage misses a sandbox's processes: bubblewrap
 * exits without waiting for the namespace's init, which is then reaped elsewhere. A cgroup counts
 * every task that ever ran in it. cgroup v1's cpuacct or v2's cpu.stat, whichever this host
 * mounts writable; `undefined` where neither is (the caller falls back to the child's own figure).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface CpuGroup {
  /** CPU of every process that ran in the group, in ms. */
  cpuMs(): number;
  /** Remove the group once its processes are gone: true when it is gone (now or before). */
  remove(): boolean;
}

const CANDIDATES: Array<{ root: string; read: (dir: string) => number }> = [
  { root: '/sys/fs/cgroup/cpuacct', read: (dir) => Number(fs.readFileSync(path.join(dir, 'cpuacct.usage'), 'utf8')) / 1e6 },
  { root: '/sys/fs/cgroup', read: (dir) => usageUsec(dir) / 1e3 },
  { root: '/sys/fs/cgroup/unified', read: (dir) => usageUsec(dir) / 1e3 },
];

function usageUsec(dir: string): number {
  const m = /^usage_usec (\d+)$/m.exec(fs.readFileSync(path.join(dir, 'cpu.stat'), 'utf8'));
  if (!m) throw new Error('no usage_usec');
  return Number(m[1]);
}

/** Move `pid` into a new group; every process it starts afterwards is counted with it. */
export function createCpuGroup(pid: number): CpuGroup | undefined {
  for (const c of CANDIDATES) {
    const dir = path.join(c.root, `maw-bench-${pid}`);
    try {
      fs.mkdirSync(dir);
    } catch {
      continue;
    }
    try {
      fs.writeFileSync(path.join(dir, 'cgroup.procs'), String(pid));
      c.read(dir);
      return {
        cpuMs: () => c.read(dir),
        remove: () => {
          try {
            fs.rmdirSync(dir);
            return true;
          } catch (e) {
            // Still busy (processes in it), or already gone.
            return (e as NodeJS.ErrnoException).code === 'ENOENT';
          }
        },
      };
    } catch {
      try {
        fs.rmdirSync(dir);
      } catch {
        // Best effort.
      }
    }
  }
  return undefined;
}
