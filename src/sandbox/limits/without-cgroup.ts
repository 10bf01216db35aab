import * as fs from 'node:fs';
import * as os from 'node:os';
import { findProgram } from '../../internal/find-program.js';
import type { ResolvedSandboxLimits } from './limits.js';

/**
 * The limits a sandbox keeps where the worker may make no cgroup (a container, a pod, a host
 * without delegation), each held by something the kernel gives every process:
 *
 * | limit          | held by                                                                       |
 * |----------------|-------------------------------------------------------------------------------|
 * | `maxProcesses` | `RLIMIT_NPROC`, set inside the sandbox's user namespace: from Linux 5.14 the kernel counts it per user namespace, so it bounds that one sandbox. Not for a worker that is root of the host (the kernel exempts that user), nor on older kernels (where it would count every process of the worker's user) |
 * | `cpuWeight`    | the sandbox's niceness: `weight / 100` of the worker's share is about `1.25^-nice`; a weight of 100 or more is niceness 0 (raising priority needs a privilege) |
 * | `memoryMiB`    | nothing: an address-space rlimit would break Node and the JIT of any runtime; the pod's or container's own memory limit bounds all sessions together |
 *
 * `tmpMiB` and `openFiles` never need a cgroup.
 */

/** What the host offers the fallbacks. */
export interface FallbackFacts {
  /** `os.release()`. */
  kernelRelease: string;
  /** The worker's uid as the host's first user namespace sees it; `undefined` when unknown. */
  hostUid: number | undefined;
  /** The `nice` program, when found. */
  nice: string | undefined;
}

/** How the limits a cgroup would hold are held without one, where they can be. */
export interface CgroupFallbacks {
  /** `RLIMIT_NPROC` set inside each sandbox's user namespace. */
  processes?: number;
  /** The niceness each sandbox runs at, with the program that sets it. */
  nice?: { level: number; program: string };
  /** Why a limit asked for is not held, by limit. */
  notHeld: Partial<Record<'memoryMiB' | 'maxProcesses' | 'cpuWeight', string>>;
}

/** The niceness whose CFS weight is closest to `weight / 100` of the worker's. */
export function niceForWeight(weight: number): number {
  if (weight >= 100) return 0;
  return Math.min(19, Math.max(0, Math.round(Math.log(100 / weight) / Math.log(1.25))));
}

/** True when the kernel counts `RLIMIT_NPROC` per user namespace (Linux 5.14 and later). */
export function countsProcessesPerNamespace(release: string): boolean {
  const m = /^(\d+)\.(\d+)/.exec(release);
  if (!m) return false;
  const major = Number(m[1]);
  const minor = Number(m[2]);
  return major > 5 || (major === 5 && minor >= 14);
}

/** Decide the fallbacks of the limits in `missing` (those no cgroup holds). Pure. */
export function cgroupFallbacks(
  limits: ResolvedSandboxLimits,
  missing: ReadonlyArray<'memoryMiB' | 'maxProcesses' | 'cpuWeight'>,
  facts: FallbackFacts,
): CgroupFallbacks {
  const out: CgroupFallbacks = { notHeld: {} };
  if (missing.includes('memoryMiB')) {
    out.notHeld.memoryMiB = "no cgroup: the container's or pod's own memory limit bounds all sessions together";
  }
  if (missing.includes('maxProcesses') && limits.maxProcesses !== null) {
    if (!countsProcessesPerNamespace(facts.kernelRelease)) {
      out.notHeld.maxProcesses = `no cgroup, and Linux ${facts.kernelRelease} counts RLIMIT_NPROC per user, not per sandbox (5.14 and later do)`;
    } else if (facts.hostUid === 0) {
      out.notHeld.maxProcesses = "no cgroup, and the kernel exempts the host's root user from RLIMIT_NPROC";
    } else {
      out.processes = limits.maxProcesses;
    }
  }
  if (missing.includes('cpuWeight') && limits.cpuWeight !== null) {
    if (facts.nice === undefined) out.notHeld.cpuWeight = 'no cgroup, and no nice program on PATH';
    else out.nice = { level: niceForWeight(limits.cpuWeight), program: facts.nice };
  }
  return out;
}

/** Read the facts {@link cgroupFallbacks} weighs. Never throws. */
export function readFallbackFacts(env: NodeJS.ProcessEnv = process.env): FallbackFacts {
  return { kernelRelease: os.release(), hostUid: hostUid(), nice: findProgram('nice', env) };
}

/** The worker's uid in the user namespace its own namespace maps into (`/proc/self/uid_map`). */
function hostUid(): number | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  try {
    for (const line of fs.readFileSync('/proc/self/uid_map', 'utf8').trim().split('\n')) {
      const [inside, outside, count] = line.trim().split(/\s+/).map(Number) as [number, number, number];
      if (uid >= inside && uid < inside + count) return outside + (uid - inside);
    }
  } catch {
    return undefined;
  }
  return undefined;
}
