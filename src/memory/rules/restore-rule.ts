/**
 * Files a stopped or timed-out tool call moved away are put back, never deleted in the store.
 *
 * A tool call the runner stopped (the session no longer takes its result, the worker stops) or
 * timed out may have been cut off half-way through moving a memory file: a `mv notes.md
 * notes.bak && ... && mv notes.bak notes.md` killed after its first step, a rewrite that renames
 * the file aside first. The file is then missing, but not because the agent decided to delete it,
 * and the call's result tells the agent only that it "may have" done its work. Left to the usual
 * rules, a later sync would confirm the missing file and delete its memory in the store (the
 * final sync at once). Instead, every file of the store the folder lacks right after such a call
 * is marked, and while a marked file is missing the planner pulls the store's version back
 * (`put-back`) instead of deleting it, whatever the deletion mode.
 *
 * Pure: it sees the state, what one scan found and when, and when the last call was stopped.
 */
import { pathEntry, setPathKey } from './path-record.js';
import type { RestoreMark, StoreSyncState } from './types.js';

export interface RestoreMarksInput {
  state: Pick<StoreSyncState, 'baseline' | 'sentShas' | 'restore'>;
  /** True when the scan found the path in any form (a file, a skipped or unreadable entry, a reserved name). */
  seen: (rel: string) => boolean;
  /** Monotonic ms of the latest stopped call whose effect no scan has looked at yet; undefined when none. */
  stoppedAtMs: number | undefined;
  /** Monotonic ms when the scan started. */
  scanStartedMs: number;
}

export interface RestoreMarks {
  /** The marks from now on (undefined when none). */
  restore: Record<string, RestoreMark> | undefined;
  /** True when the scan looked at the stopped call's effect: the stop is dealt with. */
  stopApplied: boolean;
}

/**
 * Rules:
 * - a stop is applied by the first scan that started at or after it (an earlier scan may have
 *   seen the folder before the call moved anything); it marks every path of the baseline, and
 *   every path with an upload whose answer was lost, that the scan did not see;
 * - a mark ends when a later scan sees the path again (the call's move was undone, or the file
 *   was put back), and when the path leaves the state (gone in the store too: see `sync-state.ts`,
 *   which also ends it once a pull put the file back);
 * - marks are kept only for paths the state still knows.
 */
export function restoreMarksAfterScan(input: RestoreMarksInput): RestoreMarks {
  const { state, seen, stoppedAtMs, scanStartedMs } = input;
  const stopApplied = stoppedAtMs !== undefined && stoppedAtMs <= scanStartedMs;
  const known = (rel: string): boolean => Object.hasOwn(state.baseline, rel) || Object.hasOwn(state.sentShas, rel);
  const next: Record<string, RestoreMark> = {};
  let count = 0;
  for (const [rel, mark] of Object.entries(state.restore ?? {})) {
    if (seen(rel) || !known(rel)) continue;
    setPathKey(next, rel, mark);
    count++;
  }
  if (stopApplied) {
    for (const rel of [...Object.keys(state.baseline), ...Object.keys(state.sentShas)]) {
      if (seen(rel) || pathEntry(next, rel) !== undefined) continue;
      setPathKey(next, rel, { sinceMs: scanStartedMs });
      count++;
    }
  }
  if (count === 0) return { restore: undefined, stopApplied };
  // The same record when nothing changed, so an unchanged state is not rewritten to the journal.
  const before = state.restore;
  if (
    before !== undefined &&
    Object.keys(before).length === count &&
    Object.keys(next).every((rel) => pathEntry(before, rel) === next[rel])
  ) {
    return { restore: before, stopApplied };
  }
  return { restore: next, stopApplied };
}

/** True when `rel` is marked: a stopped call may have moved it away. */
export function isMarkedForRestore(state: Pick<StoreSyncState, 'restore'>, rel: string): boolean {
  return state.restore !== undefined && pathEntry(state.restore, rel) !== undefined;
}
