// Pins the rule for files a stopped or timed-out tool call may have moved away: the first scan that
// starts after the stop marks every file of the store (baseline, or an upload whose answer was lost)
// the folder lacks; while a marked file is missing the planner puts the store's version back,
// whatever the phase, deletion mode or access, instead of deleting the memory; a mark ends when a
// scan sees the file again, when a pull put it back, or when the memory is gone from the store too;
// a clean end never carries a marked file as a deletion to the next session.
import { describe, expect, it } from 'vitest';
import { planSync, type LocalEntry, type RemoteEntry, type SyncPhase } from '../../../src/memory/rules/plan.js';
import { restoreMarksAfterScan, type RestoreMarksInput } from '../../../src/memory/rules/restore-rule.js';
import { applyOutcome, createSyncState, parseSyncState, serializeSyncState } from '../../../src/memory/rules/sync-state.js';
import { carriedDeletes } from '../../../src/memory/rules/sync-rules.js';
import type { MemoryAccess, MemoryDeleteMode, StoreSyncState } from '../../../src/memory/rules/types.js';

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);

/** A record with `key` as an own property, even `__proto__` (an object literal would set the prototype). */
function ownKey<T>(key: string, value: T): Record<string, T> {
  return Object.defineProperty({}, key, { value, enumerable: true, writable: true, configurable: true }) as Record<string, T>;
}

function state(over: Partial<StoreSyncState> = {}): StoreSyncState {
  return {
    ...createSyncState({
      storeId: 'memstore_1',
      root: '/mnt/notes',
      access: 'read_write',
      baseline: { 'notes.md': { id: 'mem_n', sha: A }, 'todo.md': { id: 'mem_t', sha: A } },
    }),
    ...over,
  };
}

describe('restoreMarksAfterScan', () => {
  const rows: Array<{
    description: string;
    input: Omit<RestoreMarksInput, 'seen' | 'state'> & { seen: string[]; state?: Partial<StoreSyncState> };
    restore: Record<string, { sinceMs: number }> | undefined;
    stopApplied: boolean;
  }> = [
    {
      description: 'no stop, no mark: nothing',
      input: { seen: ['todo.md'], stoppedAtMs: undefined, scanStartedMs: 100 },
      restore: undefined,
      stopApplied: false,
    },
    {
      description: 'a scan started after the stop marks every baseline file it did not see',
      input: { seen: ['todo.md'], stoppedAtMs: 90, scanStartedMs: 100 },
      restore: { 'notes.md': { sinceMs: 100 } },
      stopApplied: true,
    },
    {
      description: 'a scan started at the very time of the stop applies it',
      input: { seen: [], stoppedAtMs: 100, scanStartedMs: 100 },
      restore: { 'notes.md': { sinceMs: 100 }, 'todo.md': { sinceMs: 100 } },
      stopApplied: true,
    },
    {
      description: 'a scan started before the stop (it may have seen the folder before the move) leaves it for the next',
      input: { seen: ['todo.md'], stoppedAtMs: 110, scanStartedMs: 100 },
      restore: undefined,
      stopApplied: false,
    },
    {
      description: 'a path with an upload whose answer was lost is marked too',
      input: { seen: ['notes.md', 'todo.md'], stoppedAtMs: 90, scanStartedMs: 100, state: { sentShas: { 'new.md': [B] } } },
      restore: { 'new.md': { sinceMs: 100 } },
      stopApplied: true,
    },
    {
      description: 'a file the store never had (created and moved by the call) is not marked',
      input: { seen: ['notes.md', 'todo.md'], stoppedAtMs: 90, scanStartedMs: 100 },
      restore: undefined,
      stopApplied: true,
    },
    {
      description: 'a mark ends when a later scan sees the file again',
      input: {
        seen: ['notes.md', 'todo.md'],
        stoppedAtMs: undefined,
        scanStartedMs: 200,
        state: { restore: { 'notes.md': { sinceMs: 100 } } },
      },
      restore: undefined,
      stopApplied: false,
    },
    {
      description: 'a mark stays while the file is missing, with its first time',
      input: { seen: ['todo.md'], stoppedAtMs: 150, scanStartedMs: 200, state: { restore: { 'notes.md': { sinceMs: 100 } } } },
      restore: { 'notes.md': { sinceMs: 100 } },
      stopApplied: true,
    },
    {
      description: 'a mark of a path the state no longer knows ends',
      input: { seen: [], stoppedAtMs: undefined, scanStartedMs: 200, state: { baseline: {}, restore: { 'gone.md': { sinceMs: 100 } } } },
      restore: undefined,
      stopApplied: false,
    },
    {
      description: 'a path named like an object property is marked as any other',
      input: {
        seen: ['notes.md', 'todo.md'],
        stoppedAtMs: 90,
        scanStartedMs: 100,
        state: { sentShas: ownKey('__proto__', [B]) },
      },
      restore: ownKey('__proto__', { sinceMs: 100 }),
      stopApplied: true,
    },
  ];
  it.each(rows)('$description', ({ input, restore, stopApplied }) => {
    const seen = new Set(input.seen);
    const out = restoreMarksAfterScan({
      state: state(input.state),
      seen: (rel) => seen.has(rel),
      stoppedAtMs: input.stoppedAtMs,
      scanStartedMs: input.scanStartedMs,
    });
    expect(out.stopApplied).toBe(stopApplied);
    expect(out.restore).toEqual(restore);
  });

  it('hands back the same record when nothing changed, so the journal is not rewritten', () => {
    const restore = { 'notes.md': { sinceMs: 100 } };
    const out = restoreMarksAfterScan({ state: state({ restore }), seen: () => false, stoppedAtMs: undefined, scanStartedMs: 200 });
    expect(out.restore).toBe(restore);
  });
});

describe('planSync for a file marked to be put back', () => {
  const remote = new Map<string, RemoteEntry>([
    ['notes.md', { id: 'mem_n', sha: A }],
    ['todo.md', { id: 'mem_t', sha: A }],
  ]);
  const local = new Map<string, LocalEntry>([['todo.md', { kind: 'file', sha: A, size: 1 }]]);
  const marked = { 'notes.md': { sinceMs: 100 } };
  const rows: Array<{
    description: string;
    phase: SyncPhase;
    deletions?: MemoryDeleteMode;
    access?: MemoryAccess;
    over?: Partial<StoreSyncState>;
    kind: string;
    why?: string;
  }> = [
    { description: 'a routine sync puts it back', phase: 'sync', kind: 'pull', why: 'put-back' },
    { description: 'the final sync puts it back instead of deleting it', phase: 'final', kind: 'pull', why: 'put-back' },
    {
      description: 'a pending delete confirmed long since is not sent: the file is put back',
      phase: 'sync',
      over: { generation: 5, pendingDeletes: { 'notes.md': { sinceGeneration: 1, baseSha: A, sinceMs: 0 } } },
      kind: 'pull',
      why: 'put-back',
    },
    { description: 'with deletions log_only it is put back', phase: 'sync', deletions: 'log_only', kind: 'pull', why: 'put-back' },
    { description: 'with deletions disabled it is put back', phase: 'final', deletions: 'disabled', kind: 'pull', why: 'put-back' },
    { description: 'a read-only store puts it back', phase: 'sync', access: 'read_only', kind: 'pull', why: 'put-back' },
    { description: 'a flush pulls nothing and deletes nothing', phase: 'flush', kind: 'noop' },
  ];
  it.each(rows)('$description', ({ phase, deletions, access, over, kind, why }) => {
    const plan = planSync({
      state: state({ restore: marked, ...(access ? { access } : {}), ...over }),
      local,
      remote,
      deletions: deletions ?? 'enabled',
      phase,
      nowMs: 1_000_000,
      deleteAfterMs: 0,
    });
    const action = plan.actions.find((a) => a.path === 'notes.md')!;
    expect(action.kind).toBe(kind);
    if (why) expect(action).toMatchObject({ why, id: 'mem_n', sha: A });
    expect(plan.actions.find((a) => a.path === 'todo.md')!.kind).toBe('noop');
  });

  it('without the mark, the final sync deletes the memory of the missing file (what the mark prevents)', () => {
    const plan = planSync({ state: state(), local, remote, deletions: 'enabled', phase: 'final' });
    expect(plan.actions.find((a) => a.path === 'notes.md')!.kind).toBe('delete-remote');
  });

  it('a marked file changed in the store comes back as an ordinary restore', () => {
    const changed = new Map(remote).set('notes.md', { id: 'mem_n', sha: B });
    const plan = planSync({ state: state({ restore: marked }), local, remote: changed, deletions: 'enabled', phase: 'sync' });
    expect(plan.actions.find((a) => a.path === 'notes.md')).toMatchObject({ kind: 'pull', why: 'restore' });
  });

  it('a marked file gone from the store too is forgotten', () => {
    const plan = planSync({
      state: state({ restore: marked }),
      local,
      remote: new Map([...remote].filter(([p]) => p !== 'notes.md')),
      deletions: 'enabled',
      phase: 'final',
    });
    expect(plan.actions.find((a) => a.path === 'notes.md')!.kind).toBe('forget');
  });
});

describe('the sync state of a mark', () => {
  const marked = state({ restore: { 'notes.md': { sinceMs: 100 } } });
  const pull = { kind: 'pull', path: 'notes.md', id: 'mem_n', sha: A, why: 'put-back' } as const;

  it('a pull that put the file back ends the mark (and drops the empty record)', () => {
    const next = applyOutcome(marked, pull, { ok: true, id: 'mem_n', sha: A });
    expect(next.restore).toBeUndefined();
    expect('restore' in next).toBe(false);
    expect(next.baseline['notes.md']).toEqual({ id: 'mem_n', sha: A });
  });

  it('a pull that failed keeps the mark, so the next sync tries again and never deletes', () => {
    expect(applyOutcome(marked, pull, { ok: false, failure: 'transient' }).restore).toEqual({ 'notes.md': { sinceMs: 100 } });
  });

  it('a forgotten path loses its mark; other marks stay', () => {
    const two = state({ restore: { 'notes.md': { sinceMs: 100 }, 'todo.md': { sinceMs: 100 } } });
    expect(applyOutcome(two, { kind: 'forget', path: 'notes.md' }, { ok: true }).restore).toEqual({ 'todo.md': { sinceMs: 100 } });
  });

  it('survives the journal: serialised and parsed back; a malformed mark is refused by name', () => {
    expect(parseSyncState(serializeSyncState(marked)).restore).toEqual({ 'notes.md': { sinceMs: 100 } });
    const bad = JSON.stringify({ ...marked, restore: { 'notes.md': { sinceMs: 'soon' } } });
    expect(() => parseSyncState(bad)).toThrow(/restore\.notes\.md/);
  });

  it('a clean end never carries a marked file as a deletion to the next session', () => {
    const gone = new Set(['notes.md']);
    expect(carriedDeletes(state(), gone)).toEqual({ 'notes.md': { id: 'mem_n', sha: A } });
    expect(carriedDeletes(marked, gone)).toEqual({});
  });
});
