/**
 * The sync report: the counts one sync of one store (or of all stores) produced, and the few
 * functions that make, add and read them.
 */

/**
 * Counts a sync of one store (or of all stores) produced.
 * @inline
 */
export interface SyncReport {
  /** Files written to the store (created or updated). */
  uploads: number;
  /** Files written to the local folder from the store (conflicts included). */
  downloads: number;
  /** Files changed on both sides; the store's version won and the local one was copied aside. */
  conflicts: number;
  /** Memories deleted from the store because their file was deleted locally. */
  deletes: number;
  /** Local files deleted because their memory was deleted from the store. */
  localDeletes: number;
  /** Store deletions held back because `memorySyncDeletions` is `log_only`. */
  wouldDeletes: number;
  /** Files not uploaded because the store refused them or they break a bound (binary, oversized, a reserved name). */
  refusals: number;
  /** Files (or stores) whose sync failed this time; they are retried on the next sync. */
  errors: number;
  /** Stores skipped because their marker was missing or altered. */
  skippedStores: number;
  /** Milliseconds the sync took. */
  durationMs: number;
}

/** A report of nothing done. */
export function emptyReport(): SyncReport {
  return {
    uploads: 0,
    downloads: 0,
    conflicts: 0,
    deletes: 0,
    localDeletes: 0,
    wouldDeletes: 0,
    refusals: 0,
    errors: 0,
    skippedStores: 0,
    durationMs: 0,
  };
}

/** True when a sync changed something on either side (or refused something): worth an info line. */
export function changedSomething(r: SyncReport): boolean {
  return r.uploads + r.downloads + r.conflicts + r.deletes + r.localDeletes + r.wouldDeletes + r.refusals > 0;
}

/** Add `r`'s counts into `into` (not the duration). */
export function addReport(into: SyncReport, r: SyncReport): void {
  into.uploads += r.uploads;
  into.downloads += r.downloads;
  into.conflicts += r.conflicts;
  into.deletes += r.deletes;
  into.localDeletes += r.localDeletes;
  into.wouldDeletes += r.wouldDeletes;
  into.refusals += r.refusals;
  into.errors += r.errors;
  into.skippedStores += r.skippedStores;
}
