/**
 * The journal sweep at `run()` start (no credential needed): an entry whose owner is gone and whose
 * folder is gone, no longer ours, empty, or still downloading (nothing in it is an edit) is removed
 * (with the folder, when ours); a leftover holding files is kept and named in one log line, waiting
 * for the next mount of its store to adopt it (that mount has the session's credential) or for
 * `recover` (`recoverLeftovers` in mount/recovery.ts). Entries whose owner still runs are never
 * touched.
 *
 * A file of its own, importing only the journal, the folder primitives and the marker rule: every
 * worker runs it before its first session, and it must not load the sync and mount machinery a
 * worker waiting for work does not need yet.
 */
import * as fsp from 'node:fs/promises';
import { coerceError } from '../../errors.js';
import { errorSummary, resolveLogger, type Logger } from '../../internal/logger.js';
import { LocalDir } from '../disk/local-dir.js';
import { defaultStateDir } from '../disk/state-dir.js';
import { isValidMarker } from '../rules/marker.js';
import { Journal, type JournalEntry } from './journal.js';
import { checkOwner } from './owner.js';

export type LeftoverState = 'gone' | 'not-ours' | 'empty' | 'half-removed' | 'download-unfinished' | 'holds-files';

/** A journal entry whose owner is gone, with what its folder holds now. */
export interface DeadEntry {
  entry: JournalEntry;
  reason: string;
  leftover: LeftoverState;
}

/** The journal's entries whose owner is gone (an unreadable entry is logged and left as is). */
export async function deadEntries(journal: Journal, log: Logger): Promise<DeadEntry[]> {
  const out: DeadEntry[] = [];
  for (const read of await journal.list()) {
    if ('error' in read) {
      log.warn(
        { file: read.file, reason: read.error },
        'journal entry unreadable; left as is (remove it by hand once its folder is dealt with)',
      );
      continue;
    }
    const verdict = await checkOwner(read.entry.owner);
    if (verdict.alive) continue;
    out.push({ entry: read.entry, reason: verdict.reason, leftover: await leftoverState(read.entry) });
  }
  return out;
}

async function leftoverState(entry: JournalEntry): Promise<LeftoverState> {
  const st = await fsp.lstat(entry.root).catch(() => undefined);
  if (st === undefined) return 'gone';
  if (!st.isDirectory()) return 'not-ours';
  // Being removed at its session's end, everything in it saved: only the removal is left to do.
  if (entry.unmounting === true) return 'half-removed';
  const dir = new LocalDir(entry.root);
  const marker = await dir.readMarker().catch(() => undefined);
  const empty = await dir.isEmpty().catch(() => false);
  // A folder created before its marker was written (a crash right after the mkdir) is ours when empty.
  if (marker === undefined) return empty ? 'empty' : 'not-ours';
  if (!isValidMarker(marker, entry.storeId)) return 'not-ours';
  if (empty) return 'empty';
  // Its download never finished: every file came from the store (a file may be half written), none
  // is an edit; the store still holds all of it.
  return entry.downloading === true ? 'download-unfinished' : 'holds-files';
}

/** Remove the entry (and an empty leftover folder) when nothing is left to save. True when removed. */
export async function dropIfNothingToSave(journal: Journal, d: DeadEntry, log: Logger): Promise<boolean> {
  if (d.leftover === 'holds-files') return false;
  if (d.leftover === 'empty' || d.leftover === 'half-removed' || d.leftover === 'download-unfinished')
    await new LocalDir(d.entry.root).removeRoot();
  await journal.remove(d.entry.root);
  log.info(
    { root: d.entry.root, memory_store_id: d.entry.storeId, leftover: d.leftover },
    'journal entry of a worker that is gone removed; nothing was left to save',
  );
  return true;
}

/**
 * Sweep the journal at start: see the module comment. Returns the leftover folders still waiting.
 * Never throws (a problem is logged).
 */
export async function sweepJournal(opts: { stateDir?: string | undefined; logger?: Logger | undefined } = {}): Promise<string[]> {
  const log = resolveLogger(opts.logger).child({ component: 'memory-recovery' });
  const journal = new Journal(opts.stateDir ?? defaultStateDir());
  const waiting: string[] = [];
  try {
    for (const d of await deadEntries(journal, log)) {
      try {
        if (await dropIfNothingToSave(journal, d, log)) continue;
        waiting.push(d.entry.root);
        log.warn(
          { root: d.entry.root, memory_store_id: d.entry.storeId, previous_session: d.entry.sessionId, owner: d.reason },
          'leftover memory folder of a worker that is gone: the next session of this store adopts it and saves its edits, ' +
            'or run `managed-agents-worker recover` (with an API key) to save them now',
        );
      } catch (err) {
        log.warn({ root: d.entry.root, error: errorSummary(coerceError(err)) }, 'could not sweep this journal entry; left as is');
      }
    }
  } catch (err) {
    log.warn({ error: errorSummary(coerceError(err)) }, 'could not read the journal; no leftover swept');
  }
  return waiting;
}
