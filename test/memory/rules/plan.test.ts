// Pins the memory sync decision table: for one path, every combination of presence in
// (baseline, local, remote) × changed/unchanged × read-only/writable × deletion mode × phase
// gives exactly one documented action; plus lost uploads settled by sent shas, refused versions,
// shadowed and invalid paths, wipe detection, the per-sync delete cap and idempotence.
import { describe, expect, it } from 'vitest';
import {
  DELETED_FINGERPRINT,
  REFUSAL_DELETIONS_DISABLED,
  REFUSAL_READ_ONLY_DELETE,
  REFUSAL_READ_ONLY_EDIT,
  deleteCapFor,
  isRemoteWrite,
  isStateOnlyAction,
  needsLocalContent,
  needsRemoteContent,
  planSync,
  type LocalEntry,
  type RemoteEntry,
  type SyncAction,
  type SyncPhase,
} from '../../../src/memory/rules/plan.js';
import { createSyncState } from '../../../src/memory/rules/sync-state.js';
import type { MemoryAccess, MemoryDeleteMode, StoreSyncState } from '../../../src/memory/rules/types.js';

const A = 'a'.repeat(64); // baseline content
const B = 'b'.repeat(64);
const C = 'c'.repeat(64);
const D = 'd'.repeat(64);
const P = 'notes/n.md';
const ID = 'mem_1';

type LocalSpec = string | { unsyncable: string; fingerprint: string } | undefined;

interface Row {
  description: string;
  /** Baseline sha of P (id `mem_1`), or undefined. */
  base?: string;
  local?: LocalSpec;
  /** Remote sha of P, or `{ id, sha }` for another id. */
  remote?: string | RemoteEntry;
  access?: MemoryAccess;
  deletions?: MemoryDeleteMode;
  phase?: SyncPhase;
  generation?: number;
  pending?: { sinceGeneration: number; baseSha: string };
  sent?: string[];
  refused?: { fingerprint: string; reason: string };
  shadowed?: boolean;
  expected: SyncAction;
}

function toLocal(spec: LocalSpec): LocalEntry | undefined {
  if (spec === undefined) return undefined;
  if (typeof spec === 'string') return { kind: 'file', sha: spec, size: 10 };
  return { kind: 'unsyncable', reason: spec.unsyncable, fingerprint: spec.fingerprint };
}

function stateFor(row: Row): StoreSyncState {
  const state = createSyncState({
    storeId: 'memstore_1',
    root: '/mnt/memory/x',
    access: row.access ?? 'read_write',
    baseline: row.base === undefined ? {} : { [P]: { id: ID, sha: row.base } },
    shadowed: row.shadowed ? { [P]: { reason: 'case collision' } } : {},
  });
  state.generation = row.generation ?? 3;
  if (row.pending) state.pendingDeletes[P] = row.pending;
  if (row.sent) state.sentShas[P] = row.sent;
  if (row.refused) state.refused[P] = row.refused;
  return state;
}

function planOne(row: Row) {
  const local = new Map<string, LocalEntry>();
  const l = toLocal(row.local);
  if (l) local.set(P, l);
  const remote = new Map<string, RemoteEntry>();
  if (row.remote !== undefined) remote.set(P, typeof row.remote === 'string' ? { id: ID, sha: row.remote } : row.remote);
  return planSync({
    state: stateFor(row),
    local,
    remote,
    deletions: row.deletions ?? 'enabled',
    phase: row.phase ?? 'sync',
  });
}

const unsyncable = { unsyncable: 'over the 102400-byte limit', fingerprint: '200000:17:99' };

const rows: Row[] = [
  // 000 — only a stale pending delete mentions the path
  {
    description: '000: a stale pending delete alone plans a noop that clears it',
    pending: { sinceGeneration: 1, baseSha: A },
    expected: { kind: 'noop', path: P },
  },

  // 001 — remote only
  {
    description: '001: a memory new in the store is pulled',
    remote: B,
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'remote-new' },
  },
  {
    description: '001: a new memory is pulled into a read-only store too',
    remote: B,
    access: 'read_only',
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'remote-new' },
  },
  { description: '001: the flush never pulls a new memory', remote: B, phase: 'flush', expected: { kind: 'noop', path: P } },
  {
    description: '001: the final sync pulls a new memory',
    remote: B,
    phase: 'final',
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'remote-new' },
  },

  // 010 — local only
  { description: '010: a new local file is created in the store', local: B, expected: { kind: 'push-create', path: P, sha: B } },
  { description: '010: the flush creates a new local file', local: B, phase: 'flush', expected: { kind: 'push-create', path: P, sha: B } },
  {
    description: '010: a new local file in a read-only store is refused once',
    local: B,
    access: 'read_only',
    expected: { kind: 'refuse', path: P, reason: REFUSAL_READ_ONLY_EDIT, fingerprint: B },
  },
  {
    description: '010: a new local file already refused read-only is left alone',
    local: B,
    access: 'read_only',
    refused: { fingerprint: B, reason: REFUSAL_READ_ONLY_EDIT },
    expected: { kind: 'noop', path: P },
  },
  {
    description: '010: a version the server refused is not retried',
    local: B,
    refused: { fingerprint: B, reason: '413' },
    expected: { kind: 'noop', path: P },
  },
  {
    description: '010: a refused file that changed is uploaded again',
    local: C,
    refused: { fingerprint: B, reason: '413' },
    expected: { kind: 'push-create', path: P, sha: C },
  },
  {
    description: '010: an unsyncable new file is refused with its reason',
    local: unsyncable,
    expected: { kind: 'refuse', path: P, reason: unsyncable.unsyncable, fingerprint: unsyncable.fingerprint },
  },
  {
    description: '010: an unsyncable file already refused for this fingerprint is left alone',
    local: unsyncable,
    refused: { fingerprint: unsyncable.fingerprint, reason: 'x' },
    expected: { kind: 'noop', path: P },
  },
  {
    description: '010: an unsyncable file in a read-only store is refused with its own reason',
    local: unsyncable,
    access: 'read_only',
    expected: { kind: 'refuse', path: P, reason: unsyncable.unsyncable, fingerprint: unsyncable.fingerprint },
  },

  // 011 — both sides, no baseline
  {
    description: '011: both sides created the same bytes: adopt',
    local: B,
    remote: B,
    expected: { kind: 'adopt', path: P, id: ID, sha: B },
  },
  {
    description: '011: both sides created different bytes: the store wins',
    local: C,
    remote: B,
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'conflict', expectedLocalSha: C },
  },
  {
    description: '011: read-only, different bytes: the store wins',
    local: C,
    remote: B,
    access: 'read_only',
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'conflict', expectedLocalSha: C },
  },
  {
    description: '011: an unsyncable local file loses to the store',
    local: unsyncable,
    remote: B,
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'conflict' },
  },
  { description: '011: the flush skips a conflict (no pull)', local: C, remote: B, phase: 'flush', expected: { kind: 'noop', path: P } },
  {
    description: '011: the flush still adopts identical bytes',
    local: B,
    remote: B,
    phase: 'flush',
    expected: { kind: 'adopt', path: P, id: ID, sha: B },
  },

  // 100 — baseline only
  { description: '100: gone on both sides: forget', base: A, expected: { kind: 'forget', path: P } },
  { description: '100: forget also in a read-only store', base: A, access: 'read_only', expected: { kind: 'forget', path: P } },
  { description: '100: forget also in the flush', base: A, phase: 'flush', expected: { kind: 'forget', path: P } },

  // 101 — deleted locally
  {
    description: '101: a file first seen missing waits for a later sync',
    base: A,
    remote: A,
    expected: { kind: 'await-delete', path: P, baseSha: A, capped: false },
  },
  {
    description: '101: still missing in the same generation: keep waiting',
    base: A,
    remote: A,
    generation: 3,
    pending: { sinceGeneration: 3, baseSha: A },
    expected: { kind: 'await-delete', path: P, baseSha: A, capped: false },
  },
  {
    description: '101: still missing at a later sync (enabled): delete remotely with the base precondition',
    base: A,
    remote: A,
    generation: 4,
    pending: { sinceGeneration: 3, baseSha: A },
    expected: { kind: 'delete-remote', path: P, id: ID, expectedSha: A },
  },
  {
    description: '101: still missing at a later sync (log_only): would delete, deletes nothing',
    base: A,
    remote: A,
    deletions: 'log_only',
    generation: 4,
    pending: { sinceGeneration: 3, baseSha: A },
    expected: { kind: 'would-delete-remote', path: P, id: ID },
  },
  {
    description: '101: log_only first sees it missing: waits like enabled',
    base: A,
    remote: A,
    deletions: 'log_only',
    expected: { kind: 'await-delete', path: P, baseSha: A, capped: false },
  },
  {
    description: '101: disabled: never deletes; reported once',
    base: A,
    remote: A,
    deletions: 'disabled',
    generation: 4,
    pending: { sinceGeneration: 3, baseSha: A },
    expected: { kind: 'refuse', path: P, reason: REFUSAL_DELETIONS_DISABLED, fingerprint: DELETED_FINGERPRINT },
  },
  {
    description: '101: disabled, already reported: never deletes and never downloads it again',
    base: A,
    remote: A,
    deletions: 'disabled',
    generation: 4,
    refused: { fingerprint: DELETED_FINGERPRINT, reason: REFUSAL_DELETIONS_DISABLED },
    expected: { kind: 'noop', path: P },
  },
  {
    description: '101: final sync (enabled) waives the later-sync wait',
    base: A,
    remote: A,
    phase: 'final',
    expected: { kind: 'delete-remote', path: P, id: ID, expectedSha: A },
  },
  {
    description: '101: final sync (log_only) reports the would-delete at once',
    base: A,
    remote: A,
    phase: 'final',
    deletions: 'log_only',
    expected: { kind: 'would-delete-remote', path: P, id: ID },
  },
  {
    description: '101: final sync (disabled) deletes nothing',
    base: A,
    remote: A,
    phase: 'final',
    deletions: 'disabled',
    expected: { kind: 'refuse', path: P, reason: REFUSAL_DELETIONS_DISABLED, fingerprint: DELETED_FINGERPRINT },
  },
  {
    description: '101: a pending delete recorded for another base sha starts over',
    base: A,
    remote: A,
    generation: 9,
    pending: { sinceGeneration: 1, baseSha: B },
    expected: { kind: 'await-delete', path: P, baseSha: A, capped: false },
  },
  {
    description: '101: the flush never deletes a confirmed file; it stays pending',
    base: A,
    remote: A,
    phase: 'flush',
    generation: 4,
    pending: { sinceGeneration: 3, baseSha: A },
    expected: { kind: 'await-delete', path: P, baseSha: A, capped: false },
  },
  {
    description: '101: the flush records a first-seen missing file as pending',
    base: A,
    remote: A,
    phase: 'flush',
    expected: { kind: 'await-delete', path: P, baseSha: A, capped: false },
  },
  {
    description: '101: deleted locally but changed in the store: restore',
    base: A,
    remote: B,
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'restore' },
  },
  {
    description: '101: restore also when a delete was pending',
    base: A,
    remote: B,
    generation: 4,
    pending: { sinceGeneration: 3, baseSha: A },
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'restore' },
  },
  {
    description: '101: re-created in the store under a new id: restore, never delete it',
    base: A,
    remote: { id: 'mem_2', sha: A },
    generation: 4,
    pending: { sinceGeneration: 3, baseSha: A },
    expected: { kind: 'pull', path: P, id: 'mem_2', sha: A, why: 'restore' },
  },
  {
    description: '101: read-only store: restore when the store changed',
    base: A,
    remote: B,
    access: 'read_only',
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'restore' },
  },
  {
    description: '101: read-only store: a local deletion is reported once, never synced',
    base: A,
    remote: A,
    access: 'read_only',
    generation: 4,
    pending: { sinceGeneration: 3, baseSha: A },
    expected: { kind: 'refuse', path: P, reason: REFUSAL_READ_ONLY_DELETE, fingerprint: DELETED_FINGERPRINT },
  },
  {
    description: '101: read-only store: a reported deletion is then left alone',
    base: A,
    remote: A,
    access: 'read_only',
    refused: { fingerprint: DELETED_FINGERPRINT, reason: REFUSAL_READ_ONLY_DELETE },
    expected: { kind: 'noop', path: P },
  },
  {
    description: '101: read-only store, final sync: still never deletes remotely',
    base: A,
    remote: A,
    access: 'read_only',
    phase: 'final',
    expected: { kind: 'refuse', path: P, reason: REFUSAL_READ_ONLY_DELETE, fingerprint: DELETED_FINGERPRINT },
  },
  {
    description: '101: log_only after the would-delete was logged: left alone',
    base: A,
    remote: A,
    deletions: 'log_only',
    generation: 8,
    refused: { fingerprint: DELETED_FINGERPRINT, reason: 'log_only' },
    expected: { kind: 'noop', path: P },
  },
  { description: '101: the flush never restores', base: A, remote: B, phase: 'flush', expected: { kind: 'noop', path: P } },

  // 110 — deleted in the store
  {
    description: '110: deleted in the store, unchanged locally: delete the local file',
    base: A,
    local: A,
    expected: { kind: 'delete-local', path: P, expectedLocalSha: A },
  },
  {
    description: '110: deleted in the store, edited locally: re-create it',
    base: A,
    local: B,
    expected: { kind: 'push-create', path: P, sha: B },
  },
  {
    description: '110: read-only, deleted in the store, edited locally: the store wins',
    base: A,
    local: B,
    access: 'read_only',
    expected: { kind: 'delete-local', path: P, expectedLocalSha: B },
  },
  {
    description: '110: read-only, deleted in the store, unchanged locally: delete locally',
    base: A,
    local: A,
    access: 'read_only',
    expected: { kind: 'delete-local', path: P, expectedLocalSha: A },
  },
  { description: '110: the flush never deletes a local file', base: A, local: A, phase: 'flush', expected: { kind: 'noop', path: P } },
  {
    description: '110: the flush re-creates an edited file',
    base: A,
    local: B,
    phase: 'flush',
    expected: { kind: 'push-create', path: P, sha: B },
  },
  {
    description: '110: an unsyncable edit of a deleted memory is refused, not re-created',
    base: A,
    local: unsyncable,
    expected: { kind: 'refuse', path: P, reason: unsyncable.unsyncable, fingerprint: unsyncable.fingerprint },
  },
  {
    description: '110: a refused edit of a deleted memory is left alone',
    base: A,
    local: B,
    refused: { fingerprint: B, reason: '400' },
    expected: { kind: 'noop', path: P },
  },
  {
    description: '110: the final sync deletes an unchanged local file too',
    base: A,
    local: A,
    phase: 'final',
    expected: { kind: 'delete-local', path: P, expectedLocalSha: A },
  },

  // 111 — present everywhere
  { description: '111: nothing changed: noop', base: A, local: A, remote: A, expected: { kind: 'noop', path: P } },
  {
    description: '111: nothing changed in a read-only store: noop',
    base: A,
    local: A,
    remote: A,
    access: 'read_only',
    expected: { kind: 'noop', path: P },
  },
  {
    description: '111: only the store changed: pull',
    base: A,
    local: A,
    remote: B,
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'remote-changed', expectedLocalSha: A },
  },
  {
    description: '111: only the store changed, read-only: pull',
    base: A,
    local: A,
    remote: B,
    access: 'read_only',
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'remote-changed', expectedLocalSha: A },
  },
  {
    description: '111: only the local file changed: update with the listed sha as precondition',
    base: A,
    local: B,
    remote: A,
    expected: { kind: 'push-update', path: P, id: ID, sha: B, expectedSha: A },
  },
  {
    description: '111: the final sync uploads a local change',
    base: A,
    local: B,
    remote: A,
    phase: 'final',
    expected: { kind: 'push-update', path: P, id: ID, sha: B, expectedSha: A },
  },
  {
    description: '111: the flush uploads a local change',
    base: A,
    local: B,
    remote: A,
    phase: 'flush',
    expected: { kind: 'push-update', path: P, id: ID, sha: B, expectedSha: A },
  },
  {
    description: '111: read-only, local change: refused once, never uploaded',
    base: A,
    local: B,
    remote: A,
    access: 'read_only',
    expected: { kind: 'refuse', path: P, reason: REFUSAL_READ_ONLY_EDIT, fingerprint: B },
  },
  {
    description: '111: read-only, local change already reported: left alone',
    base: A,
    local: B,
    remote: A,
    access: 'read_only',
    refused: { fingerprint: B, reason: REFUSAL_READ_ONLY_EDIT },
    expected: { kind: 'noop', path: P },
  },
  {
    description: '111: read-only, the next remote change overwrites a local change',
    base: A,
    local: B,
    remote: C,
    access: 'read_only',
    refused: { fingerprint: B, reason: REFUSAL_READ_ONLY_EDIT },
    expected: { kind: 'pull', path: P, id: ID, sha: C, why: 'conflict', expectedLocalSha: B },
  },
  {
    description: '111: both changed to different bytes: the store wins',
    base: A,
    local: B,
    remote: C,
    expected: { kind: 'pull', path: P, id: ID, sha: C, why: 'conflict', expectedLocalSha: B },
  },
  {
    description: '111: both changed to the same bytes: adopt',
    base: A,
    local: B,
    remote: B,
    expected: { kind: 'adopt', path: P, id: ID, sha: B },
  },
  {
    description: '111: the flush skips a path changed on both sides',
    base: A,
    local: B,
    remote: C,
    phase: 'flush',
    expected: { kind: 'noop', path: P },
  },
  {
    description: '111: the flush never pulls a remote change',
    base: A,
    local: A,
    remote: B,
    phase: 'flush',
    expected: { kind: 'noop', path: P },
  },
  {
    description: '111: a local version the server refused is not retried',
    base: A,
    local: B,
    remote: A,
    refused: { fingerprint: B, reason: '413' },
    expected: { kind: 'noop', path: P },
  },
  {
    description: '111: a refused file that changed again is uploaded',
    base: A,
    local: C,
    remote: A,
    refused: { fingerprint: B, reason: '413' },
    expected: { kind: 'push-update', path: P, id: ID, sha: C, expectedSha: A },
  },
  {
    description: '111: a refused file whose memory changed loses to the store',
    base: A,
    local: B,
    remote: C,
    refused: { fingerprint: B, reason: '413' },
    expected: { kind: 'pull', path: P, id: ID, sha: C, why: 'conflict', expectedLocalSha: B },
  },
  {
    description: '111: an unsyncable edit is refused once',
    base: A,
    local: unsyncable,
    remote: A,
    expected: { kind: 'refuse', path: P, reason: unsyncable.unsyncable, fingerprint: unsyncable.fingerprint },
  },
  {
    description: '111: an unsyncable edit already refused is left alone',
    base: A,
    local: unsyncable,
    remote: A,
    refused: { fingerprint: unsyncable.fingerprint, reason: 'x' },
    expected: { kind: 'noop', path: P },
  },
  {
    description: '111: an unsyncable edit loses to a store change',
    base: A,
    local: unsyncable,
    remote: B,
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'conflict' },
  },
  {
    description: '111: the memory was re-created with the same bytes under a new id: adopt the id',
    base: A,
    local: A,
    remote: { id: 'mem_2', sha: A },
    expected: { kind: 'adopt', path: P, id: 'mem_2', sha: A },
  },
  {
    description: '111: a file back to its synced bytes drops a stale refusal by adopting',
    base: A,
    local: A,
    remote: A,
    refused: { fingerprint: B, reason: '413' },
    expected: { kind: 'adopt', path: P, id: ID, sha: A },
  },
  {
    description: '111: a file back after a log_only would-delete drops the stale refusal',
    base: A,
    local: A,
    remote: A,
    refused: { fingerprint: DELETED_FINGERPRINT, reason: 'log_only' },
    expected: { kind: 'adopt', path: P, id: ID, sha: A },
  },

  // sent shas — a lost upload response is settled by the next listing
  {
    description: 'sent sha: the listing shows our lost update and the file is unchanged since: adopt, no conflict',
    base: A,
    local: B,
    remote: B,
    sent: [B],
    expected: { kind: 'adopt', path: P, id: ID, sha: B },
  },
  {
    description: 'sent sha: the file changed again after a lost update: update on top of our own write',
    base: A,
    local: C,
    remote: B,
    sent: [B],
    expected: { kind: 'push-update', path: P, id: ID, sha: C, expectedSha: B },
  },
  {
    description: 'sent sha: a lost create shows up in the listing: adopt, no duplicate create',
    local: B,
    remote: { id: 'mem_9', sha: B },
    sent: [B],
    expected: { kind: 'adopt', path: P, id: 'mem_9', sha: B },
  },
  {
    description: 'sent sha: a lost create, then the file changed: update the created memory',
    local: C,
    remote: { id: 'mem_9', sha: B },
    sent: [B],
    expected: { kind: 'push-update', path: P, id: 'mem_9', sha: C, expectedSha: B },
  },
  {
    description: 'sent sha: a listed sha we did not send is a real conflict',
    base: A,
    local: C,
    remote: B,
    sent: [D],
    expected: { kind: 'pull', path: P, id: ID, sha: B, why: 'conflict', expectedLocalSha: C },
  },
  {
    description: 'sent sha: an older sent sha in the list still counts as ours',
    base: A,
    local: C,
    remote: B,
    sent: [B, D],
    expected: { kind: 'push-update', path: P, id: ID, sha: C, expectedSha: B },
  },
  {
    description: 'sent sha: a lost update, then the file was deleted: wait to delete our own write',
    base: A,
    remote: B,
    sent: [B],
    expected: { kind: 'await-delete', path: P, baseSha: B, capped: false },
  },
  {
    description: 'sent sha: nothing else changed: adopt clears the sent list',
    base: B,
    local: B,
    remote: B,
    sent: [B],
    expected: { kind: 'adopt', path: P, id: ID, sha: B },
  },

  // shadowed and invalid paths
  {
    description: 'a shadowed path is never synced, whatever the sides hold',
    base: A,
    local: B,
    remote: C,
    shadowed: true,
    expected: { kind: 'noop', path: P },
  },
  { description: 'a shadowed remote-only path is never pulled', remote: C, shadowed: true, expected: { kind: 'noop', path: P } },
];

describe('planSync decision table (one path)', () => {
  for (const row of rows) {
    it(row.description, () => {
      const plan = planOne(row);
      expect(plan.actions).toEqual([row.expected]);
      expect(plan.wiped).toBe(false);
      expect(plan.deleteCapped).toBe(0);
    });
  }

  it('covers every presence key in both access modes', () => {
    const seen = new Set<string>();
    for (const row of rows) {
      const key = `${row.base !== undefined || row.sent !== undefined ? 1 : 0}${row.local !== undefined ? 1 : 0}${row.remote !== undefined ? 1 : 0}`;
      seen.add(key);
    }
    expect([...seen].sort()).toEqual(['000', '001', '010', '011', '100', '101', '110', '111']);
  });
});

function fileMap(entries: Record<string, string>): Map<string, LocalEntry> {
  return new Map(Object.entries(entries).map(([p, sha]) => [p, { kind: 'file', sha, size: 1 } as LocalEntry]));
}

function remoteMap(entries: Record<string, string>): Map<string, RemoteEntry> {
  return new Map(Object.entries(entries).map(([p, sha]) => [p, { id: `mem_${p}`, sha }]));
}

function stateWith(baseline: Record<string, string>, extra: Partial<StoreSyncState> = {}): StoreSyncState {
  const state = createSyncState({
    storeId: 'memstore_1',
    root: '/r',
    access: 'read_write',
    baseline: Object.fromEntries(Object.entries(baseline).map(([p, sha]) => [p, { id: `mem_${p}`, sha }])),
  });
  return { ...state, ...extra };
}

describe('planSync over several paths', () => {
  it('plans one action per path, in ascending code-unit order', () => {
    const plan = planSync({
      state: stateWith({ 'b.md': A, 'a/z.md': A }),
      local: fileMap({ 'b.md': A, 'a/z.md': B, 'C.md': C }),
      remote: remoteMap({ 'b.md': A, 'a/z.md': A, 'd.md': D }),
      deletions: 'enabled',
      phase: 'sync',
    });
    expect(plan.actions.map((a) => a.path)).toEqual(['C.md', 'a/z.md', 'b.md', 'd.md']);
    expect(plan.actions.map((a) => a.kind)).toEqual(['push-create', 'push-update', 'noop', 'pull']);
  });

  it('refuses a local file under an unsafe key and never uploads it', () => {
    const plan = planSync({
      state: stateWith({}),
      local: fileMap({ '../escape.md': B, '.anthropic-memory-store': C, 'ok.md': A }),
      remote: remoteMap({ 'x/../../y': D }),
      deletions: 'enabled',
      phase: 'sync',
    });
    const byPath = new Map(plan.actions.map((a) => [a.path, a]));
    expect(byPath.get('../escape.md')?.kind).toBe('refuse');
    expect(byPath.get('.anthropic-memory-store')?.kind).toBe('refuse');
    expect(byPath.get('x/../../y')).toEqual({ kind: 'noop', path: 'x/../../y' });
    expect(byPath.get('ok.md')?.kind).toBe('push-create');
  });

  describe('when the folder was wiped whole', () => {
    const baseline = { 'a.md': A, 'b.md': A, 'c.md': A };

    it('pulls everything again, deletes nothing and says so', () => {
      const plan = planSync({
        state: stateWith(baseline, { generation: 5, pendingDeletes: { 'a.md': { sinceGeneration: 1, baseSha: A } } }),
        local: new Map(),
        remote: remoteMap({ 'a.md': A, 'b.md': B, 'new.md': C }),
        deletions: 'enabled',
        phase: 'sync',
      });
      expect(plan.wiped).toBe(true);
      expect(plan.actions).toEqual([
        { kind: 'pull', path: 'a.md', id: 'mem_a.md', sha: A, why: 'redownload' },
        { kind: 'pull', path: 'b.md', id: 'mem_b.md', sha: B, why: 'redownload' },
        { kind: 'forget', path: 'c.md' },
        { kind: 'pull', path: 'new.md', id: 'mem_new.md', sha: C, why: 'redownload' },
      ]);
    });

    it('pulls nothing in the flush phase', () => {
      const plan = planSync({
        state: stateWith(baseline),
        local: new Map(),
        remote: remoteMap(baseline),
        deletions: 'enabled',
        phase: 'flush',
      });
      expect(plan.wiped).toBe(true);
      expect(plan.actions.every((a) => a.kind === 'noop')).toBe(true);
    });

    it('is not assumed when the baseline held a single file', () => {
      const plan = planSync({
        state: stateWith({ 'a.md': A }),
        local: new Map(),
        remote: remoteMap({ 'a.md': A }),
        deletions: 'enabled',
        phase: 'final',
      });
      expect(plan.wiped).toBe(false);
      expect(plan.actions).toEqual([{ kind: 'delete-remote', path: 'a.md', id: 'mem_a.md', expectedSha: A }]);
    });

    it('is not assumed when the files went missing one sync at a time', () => {
      const plan = planSync({
        state: stateWith(baseline, {
          generation: 5,
          pendingDeletes: { 'a.md': { sinceGeneration: 4, baseSha: A }, 'b.md': { sinceGeneration: 4, baseSha: A } },
        }),
        local: new Map(),
        remote: remoteMap(baseline),
        deletions: 'enabled',
        phase: 'sync',
      });
      expect(plan.wiped).toBe(false);
      expect(plan.actions.map((a) => a.kind)).toEqual(['delete-remote', 'delete-remote', 'await-delete']);
    });

    it('is not assumed when the missing files were deletions already reported as not synced', () => {
      const refused = { fingerprint: DELETED_FINGERPRINT, reason: REFUSAL_READ_ONLY_DELETE };
      const plan = planSync({
        state: {
          ...stateWith(baseline, { refused: { 'a.md': refused, 'b.md': refused, 'c.md': refused }, generation: 5 }),
          access: 'read_only',
        },
        local: new Map(),
        remote: remoteMap(baseline),
        deletions: 'enabled',
        phase: 'sync',
      });
      expect(plan.wiped).toBe(false);
      expect(plan.actions.every((a) => a.kind === 'noop')).toBe(true);
    });

    it('is not assumed while one unsyncable file remains', () => {
      const plan = planSync({
        state: stateWith(baseline),
        local: new Map<string, LocalEntry>([['big.md', { kind: 'unsyncable', reason: 'too big', fingerprint: 'f' }]]),
        remote: remoteMap(baseline),
        deletions: 'enabled',
        phase: 'sync',
      });
      expect(plan.wiped).toBe(false);
      expect(plan.actions.filter((a) => a.kind === 'await-delete')).toHaveLength(3);
    });
  });

  describe('the per-sync remote delete cap', () => {
    const rowsCap = [
      { description: 'an empty baseline still allows 8', size: 0, expected: 8 },
      { description: 'a small baseline allows the floor of 8', size: 32, expected: 8 },
      { description: 'a quarter of the baseline between the bounds', size: 100, expected: 25 },
      { description: 'rounds a quarter down', size: 103, expected: 25 },
      { description: 'never more than 50', size: 2000, expected: 50 },
    ];
    for (const row of rowsCap) {
      it(row.description, () => expect(deleteCapFor(row.size)).toBe(row.expected));
    }

    it('deletes the first paths in order and keeps the rest pending', () => {
      const baseline: Record<string, string> = {};
      for (let i = 0; i < 100; i++) baseline[`f${String(i).padStart(3, '0')}.md`] = A;
      const pendingDeletes: StoreSyncState['pendingDeletes'] = {};
      for (const p of Object.keys(baseline)) pendingDeletes[p] = { sinceGeneration: 1, baseSha: A };
      const plan = planSync({
        state: stateWith(baseline, { generation: 2, pendingDeletes }),
        local: fileMap({ 'f099.md': A }),
        remote: remoteMap(baseline),
        deletions: 'enabled',
        phase: 'sync',
      });
      const deletes = plan.actions.filter((a) => a.kind === 'delete-remote');
      const capped = plan.actions.filter((a) => a.kind === 'await-delete');
      expect(deletes).toHaveLength(25);
      expect(deletes.map((a) => a.path)).toEqual(Object.keys(baseline).slice(0, 25));
      expect(capped).toHaveLength(74);
      expect(capped.every((a) => a.kind === 'await-delete' && a.capped)).toBe(true);
      expect(plan.deleteCapped).toBe(74);
    });

    it('never caps the final sync: 12 of 14 files deleted in the last tool call are all deleted', () => {
      const baseline: Record<string, string> = {};
      for (let i = 0; i < 14; i++) baseline[`f${String(i).padStart(2, '0')}.md`] = A;
      const plan = planSync({
        state: stateWith(baseline),
        local: fileMap({ 'f12.md': A, 'f13.md': A }),
        remote: remoteMap(baseline),
        deletions: 'enabled',
        phase: 'final',
      });
      expect(plan.actions.filter((a) => a.kind === 'delete-remote')).toHaveLength(12);
      expect(plan.deleteCapped).toBe(0);
    });
  });

  it('plans only noops when nothing changed (idempotence)', () => {
    const baseline = { 'a.md': A, 'b/c.md': B, 'd.md': C };
    const plan = planSync({
      state: stateWith(baseline),
      local: fileMap(baseline),
      remote: remoteMap(baseline),
      deletions: 'enabled',
      phase: 'sync',
    });
    expect(plan.actions).toEqual(
      Object.keys(baseline)
        .sort()
        .map((path) => ({ kind: 'noop', path })),
    );
  });
});

describe('action helpers for the executor', () => {
  const samples: Array<{ description: string; action: SyncAction; stateOnly: boolean; remote: boolean; local: boolean; write: boolean }> = [
    {
      description: 'a conflict pull fetches remote content and reads the local bytes for the conflict copy',
      action: { kind: 'pull', path: P, id: ID, sha: A, why: 'conflict' },
      stateOnly: false,
      remote: true,
      local: true,
      write: false,
    },
    {
      description: 'a plain pull fetches remote content only',
      action: { kind: 'pull', path: P, id: ID, sha: A, why: 'remote-changed' },
      stateOnly: false,
      remote: true,
      local: false,
      write: false,
    },
    {
      description: 'a create reads the local bytes and writes remotely',
      action: { kind: 'push-create', path: P, sha: A },
      stateOnly: false,
      remote: false,
      local: true,
      write: true,
    },
    {
      description: 'an update reads the local bytes and writes remotely',
      action: { kind: 'push-update', path: P, id: ID, sha: A, expectedSha: B },
      stateOnly: false,
      remote: false,
      local: true,
      write: true,
    },
    {
      description: 'a remote delete writes remotely without content',
      action: { kind: 'delete-remote', path: P, id: ID, expectedSha: A },
      stateOnly: false,
      remote: false,
      local: false,
      write: true,
    },
    {
      description: 'a local delete touches the disk only',
      action: { kind: 'delete-local', path: P, expectedLocalSha: A },
      stateOnly: false,
      remote: false,
      local: false,
      write: false,
    },
    {
      description: 'a would-delete is state-only',
      action: { kind: 'would-delete-remote', path: P, id: ID },
      stateOnly: true,
      remote: false,
      local: false,
      write: false,
    },
    {
      description: 'an await-delete is state-only',
      action: { kind: 'await-delete', path: P, baseSha: A, capped: false },
      stateOnly: true,
      remote: false,
      local: false,
      write: false,
    },
    {
      description: 'an adopt is state-only',
      action: { kind: 'adopt', path: P, id: ID, sha: A },
      stateOnly: true,
      remote: false,
      local: false,
      write: false,
    },
    {
      description: 'a forget is state-only',
      action: { kind: 'forget', path: P },
      stateOnly: true,
      remote: false,
      local: false,
      write: false,
    },
    {
      description: 'a refuse is state-only',
      action: { kind: 'refuse', path: P, reason: 'r', fingerprint: A },
      stateOnly: true,
      remote: false,
      local: false,
      write: false,
    },
    { description: 'a noop is state-only', action: { kind: 'noop', path: P }, stateOnly: true, remote: false, local: false, write: false },
  ];
  for (const s of samples) {
    it(s.description, () => {
      expect(isStateOnlyAction(s.action)).toBe(s.stateOnly);
      expect(needsRemoteContent(s.action)).toBe(s.remote);
      expect(needsLocalContent(s.action)).toBe(s.local);
      expect(isRemoteWrite(s.action)).toBe(s.write);
    });
  }
});

describe('how long a file must be gone before its memory is deleted', () => {
  // A delete must not go out one sync (5 s) after the file was first seen gone: a file an
  // editor or a checkout replaces for a few seconds would be deleted from the store.
  const AFTER = 30_000;
  const rows: Array<{
    description: string;
    phase?: SyncPhase;
    pending?: { sinceGeneration: number; baseSha: string; sinceMs?: number };
    nowMs: number;
    finalDeletes?: 'all' | 'corroborated';
    expected: SyncAction['kind'];
  }> = [
    { description: 'first seen missing: waits, recording when', nowMs: 1_000, expected: 'await-delete' },
    {
      description: 'a later sync 5 s after it was first seen gone: still waits',
      pending: { sinceGeneration: 2, baseSha: A, sinceMs: 1_000 },
      nowMs: 6_000,
      expected: 'await-delete',
    },
    {
      description: 'a later sync 29.999 s after: still waits',
      pending: { sinceGeneration: 2, baseSha: A, sinceMs: 1_000 },
      nowMs: 30_999,
      expected: 'await-delete',
    },
    {
      description: 'a later sync exactly 30 s after: deletes',
      pending: { sinceGeneration: 2, baseSha: A, sinceMs: 1_000 },
      nowMs: 31_000,
      expected: 'delete-remote',
    },
    {
      description: 'gone 60 s but seen only by this sync (same generation): waits for a later one',
      pending: { sinceGeneration: 3, baseSha: A, sinceMs: 1_000 },
      nowMs: 61_000,
      expected: 'await-delete',
    },
    {
      description: 'the final sync waives the wait: the session will not come back',
      phase: 'final',
      nowMs: 1_000,
      expected: 'delete-remote',
    },
    {
      description: 'recovering a leftover, the final sync deletes a file an earlier sync saw gone',
      phase: 'final',
      finalDeletes: 'corroborated',
      pending: { sinceGeneration: 3, baseSha: A, sinceMs: 0 },
      nowMs: 1,
      expected: 'delete-remote',
    },
    {
      description: 'recovering a leftover, a file no sync saw gone is not deleted',
      phase: 'final',
      finalDeletes: 'corroborated',
      nowMs: 1_000,
      expected: 'await-delete',
    },
  ];
  it.each(rows)('$description', ({ phase, pending, nowMs, finalDeletes, expected }) => {
    const state = createSyncState({
      storeId: 'memstore_1',
      root: '/mnt/memory/x',
      access: 'read_write',
      baseline: { [P]: { id: ID, sha: A } },
    });
    state.generation = 3;
    if (pending) state.pendingDeletes[P] = pending;
    const plan = planSync({
      state,
      local: new Map(),
      remote: new Map([[P, { id: ID, sha: A }]]),
      deletions: 'enabled',
      phase: phase ?? 'sync',
      nowMs,
      deleteAfterMs: AFTER,
      ...(finalDeletes ? { finalDeletes } : {}),
    });
    expect(plan.actions[0]!.kind).toBe(expected);
    if (expected === 'await-delete' && pending === undefined) expect(plan.actions[0]).toMatchObject({ atMs: nowMs });
  });
});
