/**
 * Whether a process id names a live process, asked with signal 0 (the kernel checks the process
 * and its permission to signal it, and sends nothing).
 */

/**
 * True when `pid` names a live process: signal 0 reaches it, or is refused only because the process
 * belongs to another user (see {@link signalErrorMeansAlive}). An id that is not a positive integer
 * names no single process (0 and negative ids name process groups): false.
 */
export function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return signalErrorMeansAlive(e);
  }
}

/**
 * Whether the error signal 0 failed with still means the process exists: `EPERM` does (it exists
 * and belongs to another user); `ESRCH` (no such process) and anything else do not.
 */
export function signalErrorMeansAlive(e: unknown): boolean {
  return (e as { code?: unknown } | null)?.code === 'EPERM';
}
