/**
 * What is observed about the process that owns a journal entry (from /proc and signal 0), and the
 * verdict `rules/owner-verdict.ts` draws from it.
 */
import * as fsp from 'node:fs/promises';
import { processAlive } from '../../internal/process-alive.js';
import { ownerVerdict, type OwnerIdentity, type OwnerVerdict } from '../rules/owner-verdict.js';

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

/** This process, as a journal records it. */
export async function currentOwner(): Promise<OwnerIdentity> {
  return { pid: process.pid, startTime: await readStartTime(process.pid), bootId: await readBootId() };
}

/** Observe the recorded owner now and decide. */
export async function checkOwner(recorded: OwnerIdentity): Promise<OwnerVerdict> {
  const exists = processAlive(recorded.pid);
  return ownerVerdict(recorded, {
    bootId: await readBootId(),
    pidExists: exists,
    startTime: exists ? await readStartTime(recorded.pid) : undefined,
  });
}
