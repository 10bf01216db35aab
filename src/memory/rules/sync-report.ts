/**
 * The sync report: the counts one sync of one store (or of all stores) produced, and the few
 * functions that make, add and read them.
 */

/** Counts a sync of one store (or of all stores) produced. */
export interface SyncReport {
  uploads: number;
  downloads: number;
  conflicts: number;
  deletes: number;
  localDeletes: number;
  wouldDeletes: number;
  refusals: number;
  errors: number;
  /** Stores skipped because their marker was missing or altered. */
  skippedStores: number;
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
