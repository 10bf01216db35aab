/**
 * What the executor does when a file changed between the scan and the action: the planner's rules
 * for races, kept pure. The executor observes the file right before it acts and asks here. The
 * rule throughout: an edit the agent made after the scan is never lost; it is either left for the
 * next sync or copied out before the store's version replaces it.
 */

import type { ActionOutcome } from './sync-state.js';

/** A pull's target right before the write. */
export interface PullRace {
  /** The plan named a conflict (both sides changed): the local bytes lose. */
  plannedConflict: boolean;
  /** A regular file is at the path now. */
  fileThere: boolean;
  /**
   * Set when the file's stat changed since the scan (checked only for a pull that is not a
   * planned conflict): its sha now, `undefined` when it could no longer be read as a regular file.
   */
  changed?: { sha: string | undefined } | undefined;
  /** The baseline sha of the path, if any. */
  baseSha: string | undefined;
  /** Sha of the bytes fetched. */
  fetchedSha: string;
  /** Sha the store reported for the fetched memory. */
  storeSha: string;
}

/**
 * - `write`: write the store's version (nothing local is lost);
 * - `copy-then-write`: keep the local bytes as a conflict copy first (a planned conflict, or an
 *   edit made after the scan that differs from both the baseline and the store's version);
 * - `keep-local`: an edit made after the scan while the store still holds the baseline: the store
 *   did not change, so it does not win; the edit stays and the next sync uploads it.
 */
export type PullRaceVerdict = { action: 'write' } | { action: 'copy-then-write' } | { action: 'keep-local'; outcome: ActionOutcome };

export function pullRaceVerdict(race: PullRace): PullRaceVerdict {
  if (!race.fileThere) return { action: 'write' };
  if (race.plannedConflict) return { action: 'copy-then-write' };
  const now = race.changed?.sha;
  if (now === undefined || now === race.baseSha || now === race.fetchedSha) return { action: 'write' };
  if (race.storeSha === race.baseSha) {
    return { action: 'keep-local', outcome: { ok: false, failure: 'transient', reason: 'file changed during the download' } };
  }
  return { action: 'copy-then-write' };
}

/** A local delete's target right before the removal. */
export interface LocalDeleteRace {
  /** What is at the path now. */
  current: 'none' | 'not-a-file' | 'file';
  /** Set when the file's stat changed since the scan: its sha now (`undefined`: unreadable as a regular file). */
  changed?: { sha: string | undefined } | undefined;
  /** The bytes the plan deletes. */
  expectedSha: string;
}

/** Remove the file only while it holds the bytes the plan saw; anything else the next sync decides again. */
export function localDeleteVerdict(race: LocalDeleteRace): { action: 'remove' } | { action: 'done'; outcome: ActionOutcome } {
  switch (race.current) {
    case 'none':
      return { action: 'done', outcome: { ok: true } };
    case 'not-a-file':
      return { action: 'done', outcome: { ok: false, failure: 'precondition', reason: 'no longer a regular file' } };
    case 'file':
      if (race.changed !== undefined && race.changed.sha !== race.expectedSha) {
        return { action: 'done', outcome: { ok: false, failure: 'precondition', reason: 'file changed since the scan' } };
      }
      return { action: 'remove' };
    default:
      return race.current satisfies never;
  }
}

/**
 * A remote delete, re-checked right before the request: it is sent only while the file is still
 * gone. A folder at the path is not the memory's file (it stays gone); a file back at the path, or
 * a path that cannot be checked, keeps the memory.
 */
export function remoteDeleteVerdict(
  now: 'missing' | 'folder' | 'other' | 'unknown',
): { action: 'send' } | { action: 'keep'; outcome: ActionOutcome } {
  if (now === 'missing' || now === 'folder') return { action: 'send' };
  return { action: 'keep', outcome: { ok: false, failure: 'precondition', reason: 'the file is there again' } };
}

/** An upload sends exactly the bytes the plan named; a file changed since the scan waits for the next sync. */
export function uploadVerdict(readSha: string, plannedSha: string): { action: 'send' } | { action: 'skip'; outcome: ActionOutcome } {
  if (readSha === plannedSha) return { action: 'send' };
  return { action: 'skip', outcome: { ok: false, failure: 'transient', reason: 'file changed since the scan' } };
}

/** A pull the folder cannot hold is reported once per listed version. */
export function isNewBlockedPull(blockedPulls: Readonly<Record<string, string>> | undefined, path: string, sha: string): boolean {
  return blockedPulls?.[path] !== sha;
}
