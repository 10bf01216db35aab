/**
 * What the benchmark parent and a worker child say to each other over the IPC channel. The child
 * runs one worker (official or ours) or the bare-client floor, and reports its own resource usage
 * so CPU and RSS are that process's alone.
 */

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
  /** Floor only: the stores to page and the sessions token that may read them. */
  floor?: { storeIds: string[]; sessionsToken: string; concurrency: number };
}

/** CPU in ms and peak RSS in MiB, from `process.resourceUsage()`. */
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
  return { cpuMs: (u.userCPUTime + u.systemCPUTime) / 1000, maxRssMiB: u.maxRSS / 1024 };
}
