import type { Logger } from '../../internal/logger.js';
import { coerceError } from '../../errors.js';
import {
  CGROUP_FIX,
  neededControllers,
  probeCgroupSupport,
  setUpSandboxCgroups,
  type CgroupController,
  type CgroupHostFacts,
  type CgroupSupport,
  writeCpuWeight,
} from './cgroup-host.js';
import { sweepSandboxCgroups } from './cgroup-sweep.js';
import { SessionCgroup } from './session-cgroup.js';
import { LimitWatch } from './limit-watch.js';
import { SandboxStarts } from './start-weight.js';
import type { LaunchBounds } from '../launcher.js';
import type { ResolvedSandboxLimits, SandboxLimitHit } from './limits.js';
import { cgroupFallbacks, readFallbackFacts, type CgroupFallbacks, type FallbackFacts } from './without-cgroup.js';

/** The limits of a worker's sandboxes as this host can enforce them, decided once at start. */
export interface SandboxLimitsRuntime {
  limits: ResolvedSandboxLimits;
  cgroups: CgroupSupport;
  /** The set limits this host cannot enforce (no cgroup controller of the worker's, and no other way). */
  unenforced: Array<keyof ResolvedSandboxLimits>;
  /** How the limits no cgroup holds are held otherwise (see `without-cgroup.ts`). */
  fallbacks: CgroupFallbacks;
  /** Why, and the fix; empty when everything is enforced. */
  problem: string;
  fix: string;
  /** The worker's starting sandboxes, whose CPU weight it raises (where the sandboxes have a CPU cgroup). */
  starts?: SandboxStarts;
}

const LIMIT_OF: Record<CgroupController, 'memoryMiB' | 'maxProcesses' | 'cpuWeight'> = {
  memory: 'memoryMiB',
  pids: 'maxProcesses',
  cpu: 'cpuWeight',
};

/**
 * Decide how the worker bounds its sandboxes: make the cgroup parent where it can, remove the
 * session cgroups a dead worker of the same state folder left, and say once, by name, each limit
 * this host cannot enforce and the fix. The sized `/tmp` and `/dev/shm`, the rlimits and the OOM
 * score hold on every host.
 */
export async function prepareSandboxLimits(
  limits: ResolvedSandboxLimits,
  ctx: { stateDir: string; log: Logger; facts?: CgroupHostFacts; fallbackFacts?: FallbackFacts },
): Promise<SandboxLimitsRuntime> {
  const cgroups = setUpSandboxCgroups(limits, ctx.stateDir, ctx.facts);
  if (cgroups.kind !== 'none') {
    const removed = await sweepSandboxCgroups(ctx.stateDir, ctx.facts ?? {});
    if (removed.length > 0) ctx.log.warn({ cgroups: removed }, 'removed the sandbox cgroups a worker that is gone left behind');
  }
  const runtime = describeEnforcement(limits, cgroups, ctx.fallbackFacts ?? readFallbackFacts());
  const cpuParent = cgroups.kind !== 'none' ? cgroups.parents.cpu : undefined;
  if (cgroups.kind !== 'none' && cpuParent !== undefined && limits.cpuWeight !== null) {
    const kind = cgroups.kind;
    runtime.starts = new SandboxStarts(
      limits.cpuWeight,
      (weight) => writeCpuWeight(cpuParent, kind, weight),
      (e) => ctx.log.warn({ err: coerceError(e) }, "the sandboxes' CPU weight could not be set for a sandbox's start"),
    );
  }
  const held = heldWithoutCgroup(runtime.fallbacks);
  if (runtime.unenforced.length > 0) {
    ctx.log.warn(
      { unenforced: runtime.unenforced, cgroup: cgroups.kind, held_without_cgroup: held },
      `sandbox limits not enforced on this host: ${runtime.unenforced.map((k) => `${k} (${limits[k]})`).join(', ')}: ${runtime.problem}. ` +
        `Fix: ${runtime.fix}. Enforced everywhere: tmpMiB, openFiles, no core files, the sandboxes' OOM score` +
        (held.length > 0 ? `; held without a cgroup: ${held.join(', ')}` : ''),
    );
  } else {
    ctx.log.info(
      {
        cgroup: cgroups.kind,
        memory_mib: limits.memoryMiB,
        max_processes: limits.maxProcesses,
        cpu_weight: limits.cpuWeight,
        tmp_mib: limits.tmpMiB,
        open_files: limits.openFiles,
        ...(held.length > 0 ? { held_without_cgroup: held } : {}),
      },
      held.length > 0
        ? `each sandbox runs with its limits (${held.join(', ')})`
        : 'each sandbox runs in a cgroup of its own with its limits',
    );
  }
  return runtime;
}

/** Which set limits {@link cgroups} leaves unenforced, how the others are held without one, and why. Pure. */
export function describeEnforcement(limits: ResolvedSandboxLimits, cgroups: CgroupSupport, facts: FallbackFacts): SandboxLimitsRuntime {
  const needed = neededControllers(limits);
  const missing = cgroups.kind === 'none' ? needed : needed.filter((c) => cgroups.parents[c] === undefined);
  const fallbacks = cgroupFallbacks(
    limits,
    missing.map((c) => LIMIT_OF[c]),
    facts,
  );
  const unenforced = missing.map((c) => LIMIT_OF[c]).filter((k) => k in fallbacks.notHeld);
  const problem =
    unenforced.length === 0
      ? ''
      : (cgroups.kind === 'none'
          ? cgroups.problem
          : `cgroup ${cgroups.kind}: the ${missing.join(', ')} controller${missing.length > 1 ? 's are' : ' is'} not available to the worker`) +
        ` (${unenforced.map((k) => `${k}: ${fallbacks.notHeld[k as keyof CgroupFallbacks['notHeld']]}`).join('; ')})`;
  return { limits, cgroups, unenforced, fallbacks, problem, fix: unenforced.length === 0 ? '' : CGROUP_FIX };
}

/** The limits held without a cgroup, as `name (how)`. */
export function heldWithoutCgroup(fallbacks: CgroupFallbacks): string[] {
  return [
    ...(fallbacks.processes !== undefined ? [`maxProcesses ${fallbacks.processes} (RLIMIT_NPROC in the sandbox's user namespace)`] : []),
    ...(fallbacks.nice !== undefined ? [`cpuWeight (niceness ${fallbacks.nice.level})`] : []),
  ];
}

/**
 * Which of `limits` this host would enforce, found without changing anything (for `doctor`): each
 * limit as `name value`, split into enforced and not, with the problem and the fix.
 */
export function hostEnforcement(
  limits: ResolvedSandboxLimits,
  facts: CgroupHostFacts = {},
  fallbackFacts: FallbackFacts = readFallbackFacts(),
): { cgroup: 'v1' | 'v2' | 'none'; enforced: string[]; unenforced: string[]; problem: string; fix: string } {
  const probe = probeCgroupSupport(facts);
  const support: CgroupSupport =
    probe.kind === 'none' ? probe : { kind: probe.kind, root: '', parents: Object.fromEntries(probe.controllers.map((c) => [c, c])) };
  const described = describeEnforcement(limits, support, fallbackFacts);
  const held = heldWithoutCgroup(described.fallbacks);
  const named = (k: keyof ResolvedSandboxLimits): string => `${k} ${limits[k]}`;
  const set = (Object.keys(limits) as Array<keyof ResolvedSandboxLimits>).filter((k) => limits[k] !== null);
  return {
    cgroup: probe.kind,
    enforced: [
      ...set.filter((k) => !described.unenforced.includes(k)).map((k) => held.find((h) => h.startsWith(`${k} `)) ?? named(k)),
      'no core files',
      'OOM score 1000',
      'read-only /dev',
    ],
    unenforced: described.unenforced.map(named),
    problem: described.problem,
    fix: described.fix,
  };
}

/**
 * One session's bounds: its cgroup (made at the first sandbox, kept across restarts of the
 * sandbox, so the counters and limits span the session), the wrapper's shell lines that put each
 * sandbox in it, and the watch that tells which limit a call reached.
 */
export class SessionLimits {
  readonly #runtime: SandboxLimitsRuntime;
  readonly #cgroup: SessionCgroup | undefined;
  readonly #watch: LimitWatch;

  constructor(runtime: SandboxLimitsRuntime, sessionKey: string, log: Logger) {
    this.#runtime = runtime;
    const { cgroups, limits } = runtime;
    let cgroup: SessionCgroup | undefined;
    if (cgroups.kind !== 'none') {
      try {
        cgroup = SessionCgroup.create(cgroups, sessionKey, limits);
      } catch (e) {
        log.warn(
          { err: coerceError(e) },
          "the session's sandbox cgroup could not be made; its sandbox runs without memory, process and CPU limits",
        );
      }
    }
    this.#cgroup = cgroup;
    this.#watch = new LimitWatch(limits, cgroup);
  }

  /** Bytes of each of the sandbox's `/tmp` and `/dev/shm`, or `null` for the kernel's default. */
  get tmpBytes(): number | null {
    const mib = this.#runtime.limits.tmpMiB;
    return mib === null ? null : mib * 1024 * 1024;
  }

  /** How the launcher's wrapper bounds each sandbox of the session before bubblewrap starts. */
  bounds(): LaunchBounds {
    return {
      cgroupEntries: this.#cgroup?.entries ?? [],
      openFiles: this.#runtime.limits.openFiles,
      nice: this.#runtime.fallbacks.nice ?? null,
    };
  }

  /** `RLIMIT_NPROC` to set inside the sandbox's user namespace, where no pids cgroup holds `maxProcesses`. */
  get processesInside(): number | undefined {
    return this.#runtime.fallbacks.processes;
  }

  /**
   * A sandbox of this session starts now: its start runs at the worker's CPU weight (see
   * `start-weight.ts`). Returns the start's end, to call once its tool host is ready, failed or
   * closed (again: nothing).
   */
  sandboxStarting(): () => void {
    const cgroup = this.#cgroup;
    const starts = this.#runtime.starts;
    if (cgroup === undefined || starts === undefined) return () => {};
    return starts.begin((weight) => cgroup.setCpuWeight(weight));
  }

  /** @internal The session's cgroup folders (one per hierarchy), when it has a cgroup; tests read them. */
  get cgroupDirs(): string[] {
    return this.#cgroup?.dirs ?? [];
  }

  /** Count from now on: what the sandbox just ended did while it ended is not the next call's. */
  rebase(): void {
    this.#watch.rebase();
  }

  /** The limits reached since the last check. */
  check(sandboxPid: number | undefined): SandboxLimitHit[] {
    return this.#watch.check(sandboxPid);
  }

  /** Kill what is left in the cgroup and remove it. Never throws. */
  async close(): Promise<void> {
    await this.#cgroup?.destroy();
  }
}
