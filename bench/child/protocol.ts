/**
 * What the benchmark parent and a worker child say to each other over the IPC channel. The child
 * runs one worker (official or ours) or the bare-client floor, and reports its own resource usage:
 * CPU of that process and of what it started (shells, sandboxes), RSS of that process alone.
 */
import { readFileSync } from 'node:fs';

/** The child's configuration, passed as the single command-line argument (JSON). */
export interface ChildConfig {
  baseURL: string;
  environmentId: string;
  environmentKey: string;
  workdir: string;
  stateDir: string;
  /** Sessions served at once (ours only; the official worker serves one at a time). */
  concurrency: number;
  memorySyncIntervalMs: number;
  /** Ours only: the `sandbox` option (default: the worker's own default). */
  sandbox?: 'auto' | 'bwrap' | 'none';
  /** Floor only: what the bare client does. */
  floor?: FloorConfig;
}

/**
 * The floor child's task: page the listings of a mount (`listings`: the stores, the sessions token
 * that may read them, requests in flight per store), or serve queued sessions with the fewest
 * requests a worker can make (`sessions`: that many at once).
 */
export type FloorConfig = { kind: 'listings'; storeIds: string[]; sessionsToken: string; concurrency: number } | { kind: 'sessions'; concurrency: number };

/**
 * CPU in ms (the process's own, plus that of the processes it started and reaped: shells, sandboxes
 * and their tool hosts) and peak RSS in MiB of the process itself, from `process.resourceUsage()`
 * and `/proc/self/stat`.
 */
export interface Usage {
  cpuMs: number;
  maxRssMiB: number;
  /** `process.memoryUsage()` (MiB) at the highest RSS sampled every 50 ms: where the peak went. */
  atPeak?: { rss: number; heapTotal: number; heapUsed: number; external: number; arrayBuffers: number };
}

export type ParentMessage = { type: 'usage'; id: number } | { type: 'stop' };

export type ChildMessage =
  | { type: 'ready'; usage: Usage }
  | { type: 'usage'; id: number; usage: Usage }
  | { type: 'stopped'; usage: Usage; error?: string };

export function usageNow(): Usage {
  const u = process.resourceUsage();
  return { cpuMs: (u.userCPUTime + u.systemCPUTime) / 1000 + reapedChildrenCpuMs(), maxRssMiB: u.maxRSS / 1024 };
}

/** CPU of the children this process has waited for (cutime + cstime of /proc/self/stat, in clock ticks of 10 ms). */
function reapedChildrenCpuMs(): number {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 16 and 17 of stat(5), counted from the state field (3).
    return (Number(fields[13]) + Number(fields[14])) * 10;
  } catch {
    return 0;
  }
}
