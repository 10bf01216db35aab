/**
 * The sync state of one store as a plain, serialisable value, and the pure transition that
 * records what an executed plan action did (`applyOutcome`). Nothing here mutates its input:
 * every function returns a new state, so a journal can persist each step as is.
 */

import { StateFileError } from '../../errors.js';
import type { SyncAction, SyncPhase } from './plan.js';
import { assertNever } from '../../internal/assert-never.js';
import { DELETED_FINGERPRINT } from './plan.js';
import type { BaselineEntry, MemoryAccess, StoreSyncState } from './types.js';
import { copyRecord, pathEntry, setPathKey } from './path-record.js';

/** At most this many unconfirmed sent shas are remembered per path (oldest dropped first). */
export const MAX_SENT_SHAS_PER_PATH = 4;

/**
 * What executing one action produced.
 * - `ok: true`: the action took effect; `id`/`sha` are the new baseline facts from the response
 *   (a created memory's id, the sha of the content actually fetched or stored). State-only
 *   actions are reported as `{ ok: true }`.
 * - `ok: false`:
 *   - `precondition`: 409 precondition / path race on an upload or remote delete, or the local
 *     file changed under a `delete-local`. The baseline is kept, so the next sync sees the
 *     conflict (store wins).
 *   - `not-found`: 404. Update → the baseline is dropped, so the next sync re-creates the memory;
 *     remote delete → done; pull → nothing recorded (the next listing decides).
 *   - `refused`: 400/413 or a deterministic path conflict: this local version is recorded in
 *     `refused` and not retried until the file changes. `reason` says why.
 *   - `transient`: 5xx, network, abort, or the file changed since the scan: nothing recorded,
 *     retried next sync.
 *   - `lost-response`: the upload may have landed but no response came back: the sent sha
 *     (`sentSha`, default the action's sha) is remembered so the next listing showing it counts
 *     as our own write.
 *   - `blocked` (pulls only): the folder cannot hold the path (a file where a folder is needed, a
 *     folder where the file goes, a symlink): the listed sha is remembered in `blockedPulls`, so
 *     it is reported once per version; retried next sync.
 */
export type ActionOutcome =
  | { ok: true; id?: string | undefined; sha?: string | undefined }
  | {
      ok: false;
      failure: 'precondition' | 'not-found' | 'refused' | 'transient' | 'lost-response' | 'blocked';
      sentSha?: string | undefined;
      reason?: string | undefined;
    };

/** Inputs of {@link createSyncState}. */
export interface CreateSyncStateInput {
  storeId: string;
  /** Absolute path of the mount folder. */
  root: string;
  access: MemoryAccess;
  /** What the download left on both sides, keyed by store-relative path. */
  baseline?: Record<string, BaselineEntry>;
  /** Remote paths not materialised (case collisions, refused names), with the reason. */
  shadowed?: Record<string, { reason: string }>;
}

/** A fresh state right after the download: generation 0, nothing pending, sent or refused. */
export function createSyncState(input: CreateSyncStateInput): StoreSyncState {
  return {
    storeId: input.storeId,
    root: input.root,
    access: input.access,
    generation: 0,
    baseline: copyRecord(input.baseline ?? {}),
    pendingDeletes: {},
    sentShas: {},
    refused: {},
    shadowed: copyRecord(input.shadowed ?? {}),
  };
}

/** A deep copy (the state is plain JSON data). */
export function cloneSyncState(state: StoreSyncState): StoreSyncState {
  return structuredClone(state);
}

/** JSON text of the state (stable key order is not guaranteed; the content is). */
export function serializeSyncState(state: StoreSyncState): string {
  return JSON.stringify(state);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Parse a state written by {@link serializeSyncState}. Throws a {@link StateFileError} naming the first
 * field that is missing or of the wrong type (a journal that fails here is ignored by recovery).
 */
export function parseSyncState(text: string): StoreSyncState {
  const value: unknown = JSON.parse(text);
  const fail = (field: string, expected: string): never => {
    throw new StateFileError(`sync state field "${field}" must be ${expected}; the journal is unreadable and is ignored`);
  };
  if (!isRecord(value)) return fail('(root)', 'an object');
  if (typeof value.storeId !== 'string') fail('storeId', 'a string');
  if (typeof value.root !== 'string') fail('root', 'a string');
  if (value.access !== 'read_write' && value.access !== 'read_only') fail('access', '"read_write" or "read_only"');
  if (typeof value.generation !== 'number' || !Number.isInteger(value.generation) || value.generation < 0) {
    fail('generation', 'a non-negative integer');
  }
  for (const field of ['baseline', 'pendingDeletes', 'sentShas', 'refused', 'shadowed'] as const) {
    if (!isRecord(value[field])) fail(field, 'an object');
  }
  for (const [path, entry] of Object.entries(value.baseline as Record<string, unknown>)) {
    if (!isRecord(entry) || typeof entry.id !== 'string' || typeof entry.sha !== 'string') {
      fail(`baseline.${path}`, '{ id: string, sha: string }');
    }
  }
  for (const [path, entry] of Object.entries(value.pendingDeletes as Record<string, unknown>)) {
    if (
      !isRecord(entry) ||
      typeof entry.sinceGeneration !== 'number' ||
      typeof entry.baseSha !== 'string' ||
      (entry.sinceMs !== undefined && typeof entry.sinceMs !== 'number') ||
      (entry.goneForMs !== undefined && typeof entry.goneForMs !== 'number')
    ) {
      fail(`pendingDeletes.${path}`, '{ sinceGeneration: number, baseSha: string, sinceMs?: number, goneForMs?: number }');
    }
  }
  for (const [path, entry] of Object.entries(value.sentShas as Record<string, unknown>)) {
    if (!Array.isArray(entry) || !entry.every((sha) => typeof sha === 'string')) fail(`sentShas.${path}`, 'a string array');
  }
  for (const [path, entry] of Object.entries(value.refused as Record<string, unknown>)) {
    if (!isRecord(entry) || typeof entry.fingerprint !== 'string' || typeof entry.reason !== 'string') {
      fail(`refused.${path}`, '{ fingerprint: string, reason: string }');
    }
  }
  for (const [path, entry] of Object.entries(value.shadowed as Record<string, unknown>)) {
    if (!isRecord(entry) || typeof entry.reason !== 'string') fail(`shadowed.${path}`, '{ reason: string }');
  }
  if (value.blockedPulls !== undefined) {
    if (!isRecord(value.blockedPulls)) fail('blockedPulls', 'an object');
    for (const [path, sha] of Object.entries(value.blockedPulls as Record<string, unknown>)) {
      if (typeof sha !== 'string') fail(`blockedPulls.${path}`, 'a string');
    }
  }
  if (value.restore !== undefined) {
    if (!isRecord(value.restore)) fail('restore', 'an object');
    for (const [path, mark] of Object.entries(value.restore as Record<string, unknown>)) {
      if (!isRecord(mark) || typeof mark.sinceMs !== 'number') fail(`restore.${path}`, '{ sinceMs: number }');
    }
  }
  return value as unknown as StoreSyncState;
}

/**
 * Records copied by the {@link applyOutcomes} call in progress: only that call holds them, so it
 * changes them in place instead of copying them again for every action (a plan of n uploads into
 * a baseline of m paths costs n + m, not n × m). Undefined outside such a call.
 */
let batchOwned: WeakSet<object> | undefined;

/** Copy of a record without `key` (the same record, changed in place, when a batch owns it). */
function without<T>(record: Record<string, T>, key: string): Record<string, T> {
  if (!Object.hasOwn(record, key)) return record;
  const next = batchOwned?.has(record) ? record : copyRecord(record);
  batchOwned?.add(next);
  delete next[key];
  return next;
}

/** Copy of a record with `key` set to `value` (the same record, changed in place, when a batch owns it). */
function withEntry<T>(record: Record<string, T>, key: string, value: T): Record<string, T> {
  if (batchOwned?.has(record)) {
    setPathKey(record, key, value);
    return record;
  }
  const next = copyRecord(record);
  setPathKey(next, key, value);
  batchOwned?.add(next);
  return next;
}

/** The path now holds the same bytes on both sides: new baseline, nothing pending, sent, refused or to put back. */
function settled(state: StoreSyncState, path: string, entry: BaselineEntry): StoreSyncState {
  return withoutRestoreMark(
    {
      ...state,
      baseline: withEntry(state.baseline, path, entry),
      pendingDeletes: without(state.pendingDeletes, path),
      sentShas: without(state.sentShas, path),
      refused: without(state.refused, path),
    },
    path,
  );
}

/** The path is gone on both sides: drop every trace of it. */
function dropped(state: StoreSyncState, path: string): StoreSyncState {
  return withoutRestoreMark(
    {
      ...state,
      baseline: without(state.baseline, path),
      pendingDeletes: without(state.pendingDeletes, path),
      sentShas: without(state.sentShas, path),
      refused: without(state.refused, path),
    },
    path,
  );
}

/** The state without a mark to put `path` back (the record dropped once empty). */
function withoutRestoreMark(state: StoreSyncState, path: string): StoreSyncState {
  if (state.restore === undefined || !Object.hasOwn(state.restore, path)) return state;
  const restore = without(state.restore, path);
  if (Object.keys(restore).length > 0) return { ...state, restore };
  const { restore: _dropped, ...rest } = state;
  return rest;
}

function rememberSent(state: StoreSyncState, path: string, sha: string): StoreSyncState {
  const previous = (pathEntry(state.sentShas, path) ?? []).filter((s) => s !== sha);
  const next = [...previous, sha].slice(-MAX_SENT_SHAS_PER_PATH);
  return { ...state, sentShas: withEntry(state.sentShas, path, next) };
}

function withBlockedPull(state: StoreSyncState, path: string, sha: string): StoreSyncState {
  if (state.blockedPulls?.[path] === sha) return state;
  return { ...state, blockedPulls: withEntry(state.blockedPulls ?? {}, path, sha) };
}

function withoutBlockedPull(state: StoreSyncState, path: string): StoreSyncState {
  if (state.blockedPulls === undefined || !Object.hasOwn(state.blockedPulls, path)) return state;
  const blockedPulls = without(state.blockedPulls, path);
  if (Object.keys(blockedPulls).length > 0) return { ...state, blockedPulls };
  const { blockedPulls: _dropped, ...rest } = state;
  return rest;
}

function rememberRefused(state: StoreSyncState, path: string, fingerprint: string, reason: string): StoreSyncState {
  return {
    ...state,
    refused: withEntry(state.refused, path, { fingerprint, reason }),
    pendingDeletes: without(state.pendingDeletes, path),
  };
}

/**
 * The next state after `action` ran with `outcome`. Pure; the input state is not modified.
 * The rule each branch implements is stated beside it. Call it once for every action of a plan,
 * state-only ones included; a plan holds one action per path, so the order across paths does
 * not matter.
 */
export function applyOutcome(input: StoreSyncState, action: SyncAction, outcome: ActionOutcome): StoreSyncState {
  const { path } = action;
  // The planner keeps a path awaiting deletion only through `await-delete` and `delete-remote`.
  // Any other action means this sync saw the file present (or the store changed), so a pending
  // delete from an earlier sync no longer applies — whatever the outcome. Otherwise a file seen
  // again, whose upload then failed, could be deleted remotely at first sight of its next removal.
  const state =
    action.kind === 'await-delete' || action.kind === 'delete-remote'
      ? input
      : { ...input, pendingDeletes: without(input.pendingDeletes, path) };
  switch (action.kind) {
    case 'noop':
      // Nothing else changes.
      return state;

    case 'adopt':
      // Both sides hold the same bytes: that is the new baseline.
      return settled(state, path, { id: action.id, sha: action.sha });

    case 'forget':
      // Gone on both sides.
      return dropped(state, path);

    case 'refuse':
      // Report once per content version: remember which version was refused.
      return rememberRefused(state, path, action.fingerprint, action.reason);

    case 'would-delete-remote':
      // log_only: logged once; the deletion is then "refused" so it is not logged every sync and
      // the memory is not downloaded again. A later remote change restores the file.
      return rememberRefused(state, path, DELETED_FINGERPRINT, 'memorySyncDeletions is "log_only": the memory is kept in the store');

    case 'await-delete': {
      // First sync seeing the file missing records the generation; a capped confirmation keeps it.
      const existing = pathEntry(state.pendingDeletes, path);
      if (existing !== undefined && existing.baseSha === action.baseSha) return state;
      return {
        ...state,
        pendingDeletes: withEntry(state.pendingDeletes, path, {
          sinceGeneration: state.generation,
          baseSha: action.baseSha,
          ...(action.atMs !== undefined ? { sinceMs: action.atMs } : {}),
        }),
      };
    }

    case 'pull': {
      // A blocked pull is remembered by listed sha (reported once per version); any other outcome
      // means the folder could hold the path, so that memory of it ends.
      const blocked = !outcome.ok && outcome.failure === 'blocked';
      const next = blocked ? withBlockedPull(state, path, action.sha) : withoutBlockedPull(state, path);
      if (outcome.ok) {
        // The file now holds the fetched content; its sha (from the response) is the baseline.
        return settled(next, path, { id: outcome.id ?? action.id, sha: outcome.sha ?? action.sha });
      }
      // A failed pull records nothing else: the next listing decides again (404 = deleted meanwhile).
      return next;
    }

    case 'push-create':
    case 'push-update': {
      if (outcome.ok) {
        const id = outcome.id ?? (action.kind === 'push-update' ? action.id : undefined);
        if (id === undefined) {
          // A create without an id in the response cannot become a baseline: treat as a lost
          // response, so the next listing settles it by sha.
          return rememberSent(state, path, outcome.sha ?? action.sha);
        }
        return settled(state, path, { id, sha: outcome.sha ?? action.sha });
      }
      switch (outcome.failure) {
        case 'precondition':
          // 409: the store changed since the listing. Keep the baseline: the next sync sees both
          // sides changed and pulls (store wins).
          return state;
        case 'not-found':
          // 404 on update: the memory is gone; drop the baseline so the next sync re-creates it.
          return action.kind === 'push-update' ? { ...state, baseline: without(state.baseline, path) } : state;
        case 'refused':
          // 400/413: this version is not retried until the file changes.
          return rememberRefused(state, path, action.sha, outcome.reason ?? 'the store refused the upload');
        case 'lost-response':
          // Maybe landed: a later listing showing this sha is our own write.
          return rememberSent(state, path, outcome.sentSha ?? action.sha);
        case 'transient':
        case 'blocked':
          return state;
        default:
          return assertNever(outcome.failure);
      }
    }

    case 'delete-local':
      if (outcome.ok) return dropped(state, path);
      // The file changed (precondition) or the delete failed: the next sync decides again.
      return state;

    case 'delete-remote':
      if (outcome.ok) return dropped(state, path);
      switch (outcome.failure) {
        case 'not-found':
          // 404: already gone, which is what we wanted.
          return dropped(state, path);
        case 'precondition':
          // 409: the store changed since; keep the memory. The next sync restores the file.
          return { ...state, pendingDeletes: without(state.pendingDeletes, path) };
        case 'refused':
        case 'transient':
        case 'lost-response':
        case 'blocked':
          // Stays pending; a lost response is settled by the next listing (gone → forget).
          return state;
        default:
          return assertNever(outcome.failure);
      }

    default:
      return assertNever(action);
  }
}

/**
 * {@link applyOutcome} for each step in order, as one transition: the same result, but each
 * record of the state is copied at most once. Pure; the input state is not modified.
 */
export function applyOutcomes(input: StoreSyncState, steps: ReadonlyArray<readonly [SyncAction, ActionOutcome]>): StoreSyncState {
  if (steps.length === 0) return input;
  const outer = batchOwned;
  batchOwned = new WeakSet();
  try {
    let state = input;
    for (const [action, outcome] of steps) state = applyOutcome(state, action, outcome);
    return state;
  } finally {
    batchOwned = outer;
  }
}

/**
 * Count a completed sync: `sync` and `final` bump the generation (a pending delete recorded in
 * generation g is confirmed by any sync planned at generation > g); a `flush` does not.
 */
export function completeGeneration(state: StoreSyncState, phase: SyncPhase): StoreSyncState {
  if (phase === 'flush') return state;
  return { ...state, generation: state.generation + 1 };
}
