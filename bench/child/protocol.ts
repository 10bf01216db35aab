/**
 * What the benchmark parent and a worker child say to each other over the IPC channel. The child
 * runs one worker (official or ours) or the bare-client floor, and reports its own resource usage;
 * the parent replaces its CPU with that of the child's cgroup where it has one (bench/cpu-group.ts),
 * which also counts what the child started (shells, sandboxes).
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
  /** Ours only: the `sandbox` option (default: the worker's own default). */
  sandbox?: 'auto' | 'bwrap' | 'none' | { mode: 'bwrap'; network?: 'host' | 'unrestricted'; limits?: null };
  /** Floor only: what the bare client does. */
  floor?: FloorConfig;
}

/**
 * The floor child's task: page the listings of a mount (`listings`: the stores, the sessions token
 * that may read them, requests in flight per store), or serve queued sessions with the fewest
 * requests a worker can make (`sessions`: that many at once).
 */
export type FloorConfig =
  | {
      kind: 'listings';
      storeIds: string[];
      sessionsToken: string;
      concurrency: number;
      /** When set, every memory listed is written once, with a plain write, under `<writeTo>/<store index>/`. */
      writeTo?: string;
      /** Page each store on one cursor, as the official worker does (no folder split). */
      oneCursor?: boolean;
    }
  | { kind: 'sessions'; concurrency: number };

/** CPU in ms and peak RSS in MiB of the process itself, from `process.resourceUsage()`. */
export interface Usage {
  cpuMs: number;
  maxRssMiB: number;
  /** `process.memoryUsage()` (MiB) at the highest RSS sampled every 50 ms: where the peak went. */
  atPeak?: { rss: number; heapTotal: number; heapUsed: number; external: number; arrayBuffers: number };
  /** RSS now, in MiB (after a full garbage collection when the parent asked for one). */
  rssMiB?: number;
  /** Wall clock (ms since the epoch) when a floor child finished its task. */
  doneAtMs?: number;
  /**
   * Ours only: wall clock (ms since the epoch) of each session's `sessionStarted` event, the end of
   * its mount. Our runner opens the session's stream while the stores mount, so the stream's opening
   * does not mark the mount's end as it does for the official worker.
   */
  readyAtMs?: number[];
}

/** `gc`: collect garbage first (the child runs with `--expose-gc`), so `rssMiB` is what stays. */
export type ParentMessage = { type: 'usage'; id: number; gc?: boolean } | { type: 'stop' };

export type ChildMessage =
  { type: 'ready'; usage: Usage } | { type: 'usage'; id: number; usage: Usage } | { type: 'stopped'; usage: Usage; error?: string };

let doneAtMs: number | undefined;

/** A floor child finished its task now. */
export function markDone(): void {
  doneAtMs = Date.now();
}

export function usageNow(): Usage {
  const u = process.resourceUsage();
  return {
    cpuMs: (u.userCPUTime + u.systemCPUTime) / 1000,
    maxRssMiB: u.maxRSS / 1024,
    rssMiB: process.memoryUsage.rss() / (1024 * 1024),
    ...(doneAtMs !== undefined ? { doneAtMs } : {}),
  };
}
