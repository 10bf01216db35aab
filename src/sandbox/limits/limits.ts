import { z } from 'zod/v3';

/**
 * What one session's sandbox may use of the host. Each field bounds one resource; `null` leaves it
 * unbounded (the host's own limits apply). The defaults fit a normal build or test suite (an
 * `npm ci` plus a TypeScript build and a vitest run of a mid-sized package, measured in a sandbox:
 * see docs/security.md, "Resource limits") with room to spare, and stop one session from taking the host.
 */
export interface SandboxLimits {
  /**
   * MiB of memory (RAM, and swap where the host has it) every process of the sandbox together may
   * use, its `/tmp` and `/dev/shm` files included. Past it the kernel kills in the sandbox only.
   * Needs a cgroup (v2 delegated, or v1 as root). Default 4096; 16..1 048 576; `null`: unbounded.
   */
  memoryMiB?: number | null;
  /**
   * Processes and threads alive at once in the sandbox (a fork bomb stops here). Needs a cgroup.
   * Default 1024; 16..4 194 304; `null`: unbounded.
   */
  maxProcesses?: number | null;
  /**
   * CPU weight of the sandboxes against the worker's own 100 (the cgroup v2 `cpu.weight` scale):
   * when both want the CPU, all sandboxes together get `cpuWeight / (100 + cpuWeight)` of it,
   * shared equally among sessions, so heartbeats and syncs keep their deadlines. Needs a cgroup.
   * Default 50; 1..10 000; `null`: no weight set (sandboxes compete as the worker's equals).
   */
  cpuWeight?: number | null;
  /** MiB of each of `/tmp` and `/dev/shm` (each its own tmpfs). Any host. Default 1024; 1..1 048 576; `null`: the kernel's tmpfs default (half of RAM). */
  tmpMiB?: number | null;
  /** Open files per process (`ulimit -n`, soft and hard). Any host. Default 8192; 64..1 048 576; `null`: as inherited. */
  openFiles?: number | null;
}

/** {@link SandboxLimits} after defaults. */
export interface ResolvedSandboxLimits {
  memoryMiB: number | null;
  maxProcesses: number | null;
  cpuWeight: number | null;
  tmpMiB: number | null;
  openFiles: number | null;
}

export const SANDBOX_LIMITS_DEFAULT: Readonly<ResolvedSandboxLimits> = Object.freeze({
  memoryMiB: 4096,
  maxProcesses: 1024,
  cpuWeight: 50,
  tmpMiB: 1024,
  openFiles: 8192,
});

/** Every limit unbounded: what `limits: null` means. */
export const SANDBOX_LIMITS_NONE: Readonly<ResolvedSandboxLimits> = Object.freeze({
  memoryMiB: null,
  maxProcesses: null,
  cpuWeight: null,
  tmpMiB: null,
  openFiles: null,
});

const bounded = (min: number, max: number): z.ZodOptional<z.ZodNullable<z.ZodNumber>> =>
  z.number().int().min(min).max(max).nullable().optional();

/** The zod schema of `sandbox.limits`. */
export const sandboxLimitsSchema = z
  .object({
    memoryMiB: bounded(16, 1_048_576),
    maxProcesses: bounded(16, 4_194_304),
    cpuWeight: bounded(1, 10_000),
    tmpMiB: bounded(1, 1_048_576),
    openFiles: bounded(64, 1_048_576),
  })
  .strict()
  .nullable();

/** What `sandbox.limits` accepts, as a validation message says it. */
export const SANDBOX_LIMITS_EXPECTED =
  'limits: null or { memoryMiB (16..1048576), maxProcesses (16..4194304), cpuWeight (1..10000), tmpMiB (1..1048576), openFiles (64..1048576) }, each an integer or null';

/** Fill in the defaults: a field left out takes its default, `null` stays unbounded; `limits: null` is all unbounded. */
export function resolveSandboxLimits(value: SandboxLimits | null | undefined): ResolvedSandboxLimits {
  if (value === null) return { ...SANDBOX_LIMITS_NONE };
  const v = value ?? {};
  const pick = <K extends keyof ResolvedSandboxLimits>(k: K): ResolvedSandboxLimits[K] =>
    v[k] === undefined ? SANDBOX_LIMITS_DEFAULT[k] : v[k]!;
  return {
    memoryMiB: pick('memoryMiB'),
    maxProcesses: pick('maxProcesses'),
    cpuWeight: pick('cpuWeight'),
    tmpMiB: pick('tmpMiB'),
    openFiles: pick('openFiles'),
  };
}

/** The limits a sandbox can reach, as its tool results, events and metrics name them. */
export type SandboxLimitName = 'memory' | 'processes' | 'tmp';

/** One limit a sandbox reached during a call. */
export interface SandboxLimitHit {
  limit: SandboxLimitName;
  /** The limit's value in its unit (MiB or processes). */
  value: number;
  /** How many times the kernel acted on it during the call (OOM kills, refused forks); 1 for a full `/tmp`. */
  count: number;
  /** The sentence the agent's tool result carries. */
  message: string;
}

/** The sentence an agent reads when its sandbox reached `limit`. */
export function describeLimitHit(limit: SandboxLimitName, value: number, where?: string): string {
  switch (limit) {
    case 'memory':
      return `the sandbox reached its memory limit of ${value} MiB; the command was killed`;
    case 'processes':
      return `the sandbox reached its limit of ${value} processes; new processes were refused`;
    case 'tmp':
      return `${where ?? '/tmp'} in the sandbox is full (its limit is ${value} MiB); writes there fail with "No space left on device"`;
  }
}
