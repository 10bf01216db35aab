import type { HostLayout } from './host-layout.js';
import { releaseSandboxCgroups } from './limits/cgroup-sweep.js';
import type { SandboxLimitsRuntime } from './limits/session-limits.js';
import type { ResolvedSandboxOptions } from './options.js';
import type { SandboxUnavailableError } from '../errors.js';

/**
 * How the sandbox holds the kernel back, decided with the probe: a user namespace always (for a
 * root worker too, so that its agents' uid 0 has no capability over the host), nested user
 * namespaces refused where bubblewrap can (`--disable-userns`, bubblewrap 0.8), and the seccomp
 * filter of `seccomp/filter.ts` on the architectures it is built for.
 */
export interface SandboxKernelHardening {
  userNamespace: boolean;
  /** bubblewrap refuses user namespaces inside the sandbox (the filter refuses them in any case). */
  disableUserns: boolean;
  /** The encoded seccomp filter bubblewrap installs; `undefined` on an architecture without one. */
  seccomp: Buffer | undefined;
}

/**
 * What a worker runs its sessions' tools in, decided once when it starts. `none` with `chosen`
 * false is `'auto'` finding no sandbox: `refusal` (on Linux) is the error a worker serving several
 * sessions refuses to start with.
 */
export type SandboxRuntime =
  | ({
      kind: 'bwrap';
      bwrap: string;
      layout: HostLayout;
      options: ResolvedSandboxOptions;
      /** How the sandboxes are bounded on this host; absent: only what the view sizes itself. */
      limits?: SandboxLimitsRuntime;
    } & SandboxKernelHardening)
  | { kind: 'none'; chosen: boolean; problem?: string; refusal?: SandboxUnavailableError };

/**
 * What a stopped worker's sandboxes leave on the host, removed: the empty parent cgroups of its
 * sessions' cgroups (a parent another worker of the same state folder still uses is left). Returns
 * the folders removed; never throws.
 */
export function releaseSandboxRuntime(runtime: SandboxRuntime): string[] {
  return runtime.kind === 'bwrap' && runtime.limits !== undefined ? releaseSandboxCgroups(runtime.limits.cgroups) : [];
}

/**
 * The sandbox a session's agent toolset runs in: the worker's bubblewrap runtime, unless the
 * session's tools are the caller's own (`tools`), which run in the worker process.
 */
export function sessionSandboxOf(
  runtime: SandboxRuntime | undefined,
  customTools: boolean,
): Extract<SandboxRuntime, { kind: 'bwrap' }> | undefined {
  return !customTools && runtime?.kind === 'bwrap' ? runtime : undefined;
}
