import { isUnderSkipped, type LocalScan } from './scan.js';
import type { StoreSyncState } from './types.js';

/**
 * The baseline files a scan did not see in any form, the only ones that may be gone: a file the
 * scan found (read or not), a reserved temp name and anything at or below a skipped entry (a
 * FIFO, a symlink, an unreadable folder) are there. Refused paths are left out (a refused deletion
 * is never carried). The caller confirms each candidate on disk before treating it as gone, so a
 * folder put where the file was still counts as present.
 */
export function goneCandidates(
  state: Pick<StoreSyncState, 'baseline' | 'refused'>,
  scan: Pick<LocalScan, 'stats' | 'reserved' | 'skipped'>,
): string[] {
  const reserved = new Set(scan.reserved);
  const skipped = new Set(scan.skipped.map((s) => s.rel));
  const out: string[] = [];
  for (const rel of Object.keys(state.baseline)) {
    if (Object.hasOwn(state.refused, rel) || scan.stats.has(rel) || reserved.has(rel) || isUnderSkipped(rel, skipped)) continue;
    out.push(rel);
  }
  return out;
}
