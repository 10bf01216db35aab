/**
 * Who owns a journal entry, and whether that owner still runs. A process is identified by its pid,
 * its start time (so a recycled pid is not taken for the old process) and the machine's boot id
 * (after a reboot every recorded process is gone, whatever the pid).
 */
export interface OwnerIdentity {
  pid: number;
  /** Start time of the process in clock ticks since boot (`/proc/<pid>/stat` field 22), when readable. */
  startTime?: string | undefined;
  /** `/proc/sys/kernel/random/boot_id`, when readable. */
  bootId?: string | undefined;
}

/** What is observed now about a recorded owner. */
export interface OwnerObservation {
  /** This machine's boot id now, when readable. */
  bootId: string | undefined;
  /** Whether a process with the recorded pid exists (signal 0 succeeds or is refused with EPERM). */
  pidExists: boolean;
  /** Start time of the process holding that pid now, when readable. */
  startTime: string | undefined;
}

export type OwnerVerdict = { alive: true; reason: string } | { alive: false; reason: string };

/**
 * Decide whether the recorded owner still runs. Pure. Dead when the machine rebooted since (boot
 * ids differ), when no process has the pid, or when the process holding the pid started at
 * another time (the pid was reused). Alive otherwise: when in doubt, the folder is not touched.
 */
export function ownerVerdict(recorded: OwnerIdentity, now: OwnerObservation): OwnerVerdict {
  if (recorded.bootId !== undefined && now.bootId !== undefined && recorded.bootId !== now.bootId) {
    return { alive: false, reason: 'the machine rebooted since' };
  }
  if (!now.pidExists) return { alive: false, reason: `process ${recorded.pid} is gone` };
  if (recorded.startTime !== undefined && now.startTime !== undefined && recorded.startTime !== now.startTime) {
    return { alive: false, reason: `pid ${recorded.pid} now belongs to another process` };
  }
  return { alive: true, reason: `process ${recorded.pid} still runs` };
}
