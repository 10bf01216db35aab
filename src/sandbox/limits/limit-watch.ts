import * as fs from 'node:fs';
import type { SessionCgroup, CgroupCounters } from './session-cgroup.js';
import { describeLimitHit, type ResolvedSandboxLimits, type SandboxLimitHit } from './limits.js';

/** Bytes free under which a sized tmpfs counts as full. */
const FULL_BELOW_BYTES = 256 * 1024;

/**
 * Tells, after each tool call, which limits the session's sandbox reached during it: from the
 * cgroup's counters (OOM kills, refused forks) and from the free space of its sized `/tmp` and
 * `/dev/shm` (read through `/proc/<init>/root`, the sandbox's own root). A full tmpfs is told once,
 * until it has room again.
 */
export class LimitWatch {
  readonly #limits: ResolvedSandboxLimits;
  readonly #cgroup: SessionCgroup | undefined;
  #seen: CgroupCounters;
  readonly #full = new Set<string>();

  constructor(limits: ResolvedSandboxLimits, cgroup: SessionCgroup | undefined) {
    this.#limits = limits;
    this.#cgroup = cgroup;
    this.#seen = cgroup?.counters() ?? { oomKills: 0, pidsRefused: 0 };
  }

  /**
   * Take the counters as they are now, reporting nothing: what a sandbox did while it was being
   * ended (a fork bomb's last refused forks) belongs to the call that ended it, not to the next.
   */
  rebase(): void {
    if (this.#cgroup) this.#seen = this.#cgroup.counters();
  }

  /** The limits reached since the last check. `sandboxPid`: the sandbox's init, when it still runs. */
  check(sandboxPid: number | undefined): SandboxLimitHit[] {
    const hits: SandboxLimitHit[] = [];
    if (this.#cgroup) {
      const now = this.#cgroup.counters();
      if (now.oomKills > this.#seen.oomKills && this.#limits.memoryMiB !== null) {
        hits.push({
          limit: 'memory',
          value: this.#limits.memoryMiB,
          count: now.oomKills - this.#seen.oomKills,
          message: describeLimitHit('memory', this.#limits.memoryMiB),
        });
      }
      if (now.pidsRefused > this.#seen.pidsRefused && this.#limits.maxProcesses !== null) {
        hits.push({
          limit: 'processes',
          value: this.#limits.maxProcesses,
          count: now.pidsRefused - this.#seen.pidsRefused,
          message: describeLimitHit('processes', this.#limits.maxProcesses),
        });
      }
      this.#seen = now;
    }
    if (this.#limits.tmpMiB !== null && sandboxPid !== undefined) {
      for (const where of ['/tmp', '/dev/shm']) {
        const free = freeBytes(`/proc/${sandboxPid}/root${where}`);
        if (free === undefined) continue;
        if (free >= FULL_BELOW_BYTES) {
          this.#full.delete(where);
          continue;
        }
        if (this.#full.has(where)) continue;
        this.#full.add(where);
        hits.push({ limit: 'tmp', value: this.#limits.tmpMiB, count: 1, message: describeLimitHit('tmp', this.#limits.tmpMiB, where) });
      }
    }
    return hits;
  }
}

function freeBytes(dir: string): number | undefined {
  try {
    const s = fs.statfsSync(dir);
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}
