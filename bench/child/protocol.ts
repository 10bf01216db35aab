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
  /** Floor only: what the bare client does. */
  floor?: FloorConfig;
}

/**
 * The floor child's task: page the listings of a mount (`listings`: the stores, the sessions token
 * that may read them, requests in flight per store), or serve queued sessions with the fewest
 * requests a worker can make (`sessions`: that many at once).
 */
export type FloorConfig =
  | { kind: 'listings'; storeIds: string[]; sessionsToken: string; concurrency: number; /** Page each store on one cursor, as the official worker does (no folder split). */ oneCursor?: boolean }
  | { kind: 'sessions'; concurrency: number };

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
