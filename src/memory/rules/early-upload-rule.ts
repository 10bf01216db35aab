/**
 * Which new local files the final sync may upload while its scan is still running, before the plan
 * exists (the session is over: what is left is a race to the bound). Routine syncs plan first:
 * there the overlap only moves the first upload earlier, without ending the pass sooner. Pure: it
 * sees the sync state, the remote view and one scanned file.
 *
 * A file qualifies only when no other path can change what the plan does with it: it is unknown to
 * the baseline, the listing, pending deletes, sent shas, refusals and shadowed paths; no listed or
 * baseline path lies above or below it (no file/folder overlap, nothing a local or remote delete
 * frees first); the folder is case-sensitive; and the planner itself, given that path alone, says
 * `push-create`. Everything else waits for the whole plan.
 */
import { planSync, type LocalEntry, type RemoteEntry, type SyncAction } from './plan.js';
import type { MemoryDeleteMode, StoreSyncState } from './types.js';

/** What the rule looks up for every file, computed once per listing. */
export interface EarlyUploadIndex {
  state: StoreSyncState;
  deletions: MemoryDeleteMode;
  /** Paths of the listing and of the baseline. */
  known: ReadonlySet<string>;
  /** Every folder above a known path. */
  folders: ReadonlySet<string>;
  /** True only for the final sync of a writable store in a case-sensitive folder. */
  enabled: boolean;
}

export function earlyUploadIndex(input: {
  state: StoreSyncState;
  remote: ReadonlyMap<string, RemoteEntry>;
  deletions: MemoryDeleteMode;
  caseInsensitive: boolean;
  phase: 'sync' | 'final' | 'flush';
}): EarlyUploadIndex {
  const known = new Set<string>([...input.remote.keys(), ...Object.keys(input.state.baseline)]);
  const folders = new Set<string>();
  for (const rel of known) {
    for (let i = rel.indexOf('/'); i !== -1; i = rel.indexOf('/', i + 1)) folders.add(rel.slice(0, i));
  }
  const enabled = !input.caseInsensitive && input.state.access === 'read_write' && input.phase === 'final';
  return { state: input.state, deletions: input.deletions, known, folders, enabled };
}

/** The `push-create` the plan will hold for `rel` whatever else the scan finds, or undefined. */
export function earlyUpload(
  index: EarlyUploadIndex,
  rel: string,
  entry: LocalEntry,
): Extract<SyncAction, { kind: 'push-create' }> | undefined {
  const { state } = index;
  if (!index.enabled || entry.kind !== 'file') return undefined;
  if (index.known.has(rel) || index.folders.has(rel)) return undefined;
  for (const record of [state.pendingDeletes, state.sentShas, state.refused, state.shadowed])
    if (Object.hasOwn(record, rel)) return undefined;
  for (let i = rel.indexOf('/'); i !== -1; i = rel.indexOf('/', i + 1)) if (index.known.has(rel.slice(0, i))) return undefined;
  // The planner's own rule for a path only the folder holds.
  const alone: StoreSyncState = { ...state, baseline: {}, pendingDeletes: {}, sentShas: {}, refused: {}, shadowed: {} };
  const [action] = planSync({
    state: alone,
    local: new Map([[rel, entry]]),
    remote: new Map(),
    deletions: index.deletions,
    phase: 'sync',
  }).actions;
  return action?.kind === 'push-create' ? action : undefined;
}
