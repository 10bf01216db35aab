import * as fsp from 'node:fs/promises';

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

export async function readBootId(): Promise<string | undefined> {
  try {
    return (await fsp.readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Field 22 of `/proc/<pid>/stat` (start time), or undefined where /proc is not there. */
export async function readStartTime(pid: number): Promise<string | undefined> {
  try {
    const text = await fsp.readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return fields[19];
  } catch {
    return undefined;
  }
}

export function pidExists(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** This process, as a journal records it. */
export async function currentOwner(): Promise<OwnerIdentity> {
  return { pid: process.pid, startTime: await readStartTime(process.pid), bootId: await readBootId() };
}

/** Observe the recorded owner now and decide. */
export async function checkOwner(recorded: OwnerIdentity): Promise<OwnerVerdict> {
  const exists = pidExists(recorded.pid);
  return ownerVerdict(recorded, {
    bootId: await readBootId(),
    pidExists: exists,
    startTime: exists ? await readStartTime(recorded.pid) : undefined,
  });
}
