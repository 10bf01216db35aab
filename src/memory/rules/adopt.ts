import type { MarkerVerdict } from './marker.js';
import type { OwnerVerdict } from './owner-verdict.js';

/**
 * Whether a mount may take over what it finds at its path. Pure: the caller observes the path,
 * the marker and the journal, and this decides.
 *
 * Only one thing is taken over: a real folder carrying our marker for the same store, whose journal
 * entry names the same store and an owner process that is gone (a worker that crashed). Anything
 * else at the path is refused, and the message says whether it is a leftover `recover` can handle.
 *
 * Such a folder whose download never finished (the entry says `downloading`) is cleared instead:
 * its files came from the store alone (the session starts after the mount) and one may be half
 * written, so taking it over could upload a torn file as an edit; the store is downloaded again.
 */
export type FoundAtPath =
  | { kind: 'nothing' }
  | { kind: 'symlink' }
  | { kind: 'file' }
  | {
      kind: 'folder';
      /** The marker read against the store being mounted (the rule the sync loop applies too). */
      marker: MarkerVerdict;
      /** Nothing in it but possibly the marker and our temp files. */
      empty?: boolean;
    };

export type JournalFact =
  | { kind: 'none' }
  | { kind: 'unreadable'; error: string }
  | { kind: 'entry'; storeId: string; owner: OwnerVerdict; unmounting?: boolean; downloading?: boolean };

export type AdoptVerdict =
  | { action: 'create' }
  | { action: 'adopt'; reason: string }
  /**
   * Remove what is there, then create: an empty folder a dead worker of this store created before
   * its marker, one it was still downloading into (nothing in it is an edit), or one it was removing
   * at its session's end (everything in it already saved).
   */
  | { action: 'clear'; reason: string }
  | { action: 'refuse'; recoverable: boolean; reason: string };

export function adoptVerdict(storeId: string, found: FoundAtPath, journal: JournalFact): AdoptVerdict {
  switch (found.kind) {
    case 'nothing':
      return { action: 'create' };
    case 'symlink':
      return { action: 'refuse', recoverable: false, reason: 'a symlink is there; not a leftover of this worker' };
    case 'file':
      return { action: 'refuse', recoverable: false, reason: 'a file (not a folder) is there; not a leftover of this worker' };
    case 'folder':
      break;
  }
  const marker = found.marker;
  if (journal.kind === 'entry' && journal.storeId === storeId && !journal.owner.alive && journal.unmounting === true) {
    return {
      action: 'clear',
      reason: `a folder a worker that is gone was removing at its session's end, everything in it saved (${journal.owner.reason})`,
    };
  }
  if (
    journal.kind === 'entry' &&
    journal.storeId === storeId &&
    !journal.owner.alive &&
    journal.downloading === true &&
    marker.kind === 'ours'
  ) {
    return {
      action: 'clear',
      reason: `a folder a worker that is gone was still downloading this store into (${journal.owner.reason}): nothing in it is an edit, and a file may be half written`,
    };
  }
  if (
    marker.kind === 'missing' &&
    found.empty === true &&
    journal.kind === 'entry' &&
    journal.storeId === storeId &&
    !journal.owner.alive
  ) {
    return { action: 'clear', reason: `an empty folder a worker that is gone created for this store (${journal.owner.reason})` };
  }
  switch (marker.kind) {
    case 'missing':
      return {
        action: 'refuse',
        recoverable: false,
        reason: 'a folder without the .anthropic-memory-store marker is there; not a leftover of this worker',
      };
    case 'malformed':
    case 'not-a-file':
      return {
        action: 'refuse',
        recoverable: false,
        reason: 'a folder whose .anthropic-memory-store marker is malformed is there; not a leftover of this worker',
      };
    case 'other-store':
      return { action: 'refuse', recoverable: false, reason: `a folder of another memory store (${marker.storeId}) is there` };
    case 'ours':
      break;
    default:
      return marker satisfies never;
  }
  switch (journal.kind) {
    case 'none':
      return {
        action: 'refuse',
        recoverable: false,
        reason:
          "a folder with this store's marker is there, but the state folder has no journal entry for it (another state folder, or copied by hand); not a recoverable leftover",
      };
    case 'unreadable':
      return {
        action: 'refuse',
        recoverable: false,
        reason: `a folder with this store's marker is there, but its journal entry is unreadable (${journal.error})`,
      };
    case 'entry':
      if (journal.storeId !== storeId) {
        return {
          action: 'refuse',
          recoverable: false,
          reason: `a folder with this store's marker is there, but its journal entry names store ${journal.storeId}`,
        };
      }
      if (journal.owner.alive) {
        return {
          action: 'refuse',
          recoverable: true,
          reason: `a recoverable leftover of this store is there, but its owner still runs (${journal.owner.reason}): another worker on this host is using it`,
        };
      }
      return { action: 'adopt', reason: `leftover of a worker that is gone (${journal.owner.reason})` };
    default:
      return journal satisfies never;
  }
}
