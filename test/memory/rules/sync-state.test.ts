// Pins how the sync state records what an executed action did (applyOutcome): every action ×
// outcome row leaves the baseline, pending deletes, sent shas and refusals as documented, never
// mutates its input, and the state survives a JSON round trip.
import { describe, expect, it } from 'vitest';
import { DELETED_FINGERPRINT, planSync, type SyncAction } from '../../../src/memory/rules/plan.js';
import {
  MAX_SENT_SHAS_PER_PATH,
  applyOutcome,
  applyOutcomes,
  cloneSyncState,
  completeGeneration,
  createSyncState,
  parseSyncState,
  serializeSyncState,
  type ActionOutcome,
} from '../../../src/memory/rules/sync-state.js';
import type { StoreSyncState } from '../../../src/memory/rules/types.js';

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);
const C = 'c'.repeat(64);
const P = 'n.md';

/** A state where P has baseline A, a pending delete, a sent sha and a refusal — so clearing is visible. */
function busyState(): StoreSyncState {
  return {
    ...createSyncState({ storeId: 'memstore_1', root: '/r', access: 'read_write', baseline: { [P]: { id: 'mem_1', sha: A } } }),
    generation: 7,
    pendingDeletes: { [P]: { sinceGeneration: 5, baseSha: A } },
    sentShas: { [P]: [C] },
    refused: { [P]: { fingerprint: C, reason: '413' } },
  };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

interface Row {
  description: string;
  action: SyncAction;
  outcome: ActionOutcome;
  expect: (next: StoreSyncState, before: StoreSyncState) => void;
}

const withoutPending = (state: StoreSyncState): StoreSyncState => ({ ...state, pendingDeletes: {} });

const cleared = (next: StoreSyncState) => {
  expect(next.pendingDeletes[P]).toBeUndefined();
  expect(next.sentShas[P]).toBeUndefined();
  expect(next.refused[P]).toBeUndefined();
};

const rows: Row[] = [
  {
    description: 'a pulled file takes the sha of the content actually fetched as baseline',
    action: { kind: 'pull', path: P, id: 'mem_1', sha: B, why: 'remote-changed' },
    outcome: { ok: true, sha: C },
    expect: (next) => {
      expect(next.baseline[P]).toEqual({ id: 'mem_1', sha: C });
      cleared(next);
    },
  },
  {
    description: 'a pull without response facts records the listed sha',
    action: { kind: 'pull', path: P, id: 'mem_1', sha: B, why: 'conflict' },
    outcome: { ok: true },
    expect: (next) => expect(next.baseline[P]).toEqual({ id: 'mem_1', sha: B }),
  },
  {
    description: 'a failed pull (404 meanwhile) records nothing',
    action: { kind: 'pull', path: P, id: 'mem_1', sha: B, why: 'remote-changed' },
    outcome: { ok: false, failure: 'not-found' },
    expect: (next, before) => expect(next).toEqual(withoutPending(before)),
  },
  {
    description: 'a create records the new id and sha from the response',
    action: { kind: 'push-create', path: P, sha: B },
    outcome: { ok: true, id: 'mem_new', sha: B },
    expect: (next) => {
      expect(next.baseline[P]).toEqual({ id: 'mem_new', sha: B });
      cleared(next);
    },
  },
  {
    description: 'a create answered without an id is remembered as sent, to be settled by the listing',
    action: { kind: 'push-create', path: P, sha: B },
    outcome: { ok: true },
    expect: (next) => {
      expect(next.baseline[P]).toEqual({ id: 'mem_1', sha: A });
      expect(next.sentShas[P]).toEqual([C, B]);
    },
  },
  {
    description: 'an update records the sha the server now holds',
    action: { kind: 'push-update', path: P, id: 'mem_1', sha: B, expectedSha: A },
    outcome: { ok: true, sha: B },
    expect: (next) => {
      expect(next.baseline[P]).toEqual({ id: 'mem_1', sha: B });
      cleared(next);
    },
  },
  {
    description: 'an update that hit a 409 precondition keeps the baseline, so the next sync pulls (store wins)',
    action: { kind: 'push-update', path: P, id: 'mem_1', sha: B, expectedSha: A },
    outcome: { ok: false, failure: 'precondition' },
    expect: (next, before) => expect(next).toEqual(withoutPending(before)),
  },
  {
    description: 'an update that hit a 404 drops the baseline, so the next sync re-creates the memory',
    action: { kind: 'push-update', path: P, id: 'mem_1', sha: B, expectedSha: A },
    outcome: { ok: false, failure: 'not-found' },
    expect: (next) => expect(next.baseline[P]).toBeUndefined(),
  },
  {
    description: 'a create that hit a 404 (store gone) changes nothing but the stale pending delete',
    action: { kind: 'push-create', path: P, sha: B },
    outcome: { ok: false, failure: 'not-found' },
    expect: (next, before) => expect(next).toEqual(withoutPending(before)),
  },
  {
    description: 'a refused upload records the refused version and its reason',
    action: { kind: 'push-update', path: P, id: 'mem_1', sha: B, expectedSha: A },
    outcome: { ok: false, failure: 'refused', reason: '413 content too large' },
    expect: (next) => expect(next.refused[P]).toEqual({ fingerprint: B, reason: '413 content too large' }),
  },
  {
    description: 'a lost upload response remembers the sent sha',
    action: { kind: 'push-update', path: P, id: 'mem_1', sha: B, expectedSha: A },
    outcome: { ok: false, failure: 'lost-response' },
    expect: (next) => {
      expect(next.sentShas[P]).toEqual([C, B]);
      expect(next.baseline[P]).toEqual({ id: 'mem_1', sha: A });
    },
  },
  {
    description: 'a lost response remembers the sha the executor says it sent',
    action: { kind: 'push-create', path: P, sha: B },
    outcome: { ok: false, failure: 'lost-response', sentSha: A },
    expect: (next) => expect(next.sentShas[P]).toEqual([C, A]),
  },
  {
    description: 'a transient upload failure still ends a pending delete: the scan saw the file',
    action: { kind: 'push-create', path: P, sha: B },
    outcome: { ok: false, failure: 'transient' },
    expect: (next, before) => expect(next).toEqual(withoutPending(before)),
  },
  {
    description: 'a remote delete done drops every trace of the path',
    action: { kind: 'delete-remote', path: P, id: 'mem_1', expectedSha: A },
    outcome: { ok: true },
    expect: (next) => {
      expect(next.baseline[P]).toBeUndefined();
      cleared(next);
    },
  },
  {
    description: 'a remote delete answered 404 counts as done',
    action: { kind: 'delete-remote', path: P, id: 'mem_1', expectedSha: A },
    outcome: { ok: false, failure: 'not-found' },
    expect: (next) => expect(next.baseline[P]).toBeUndefined(),
  },
  {
    description: 'a remote delete refused by its precondition keeps the memory and ends the pending delete',
    action: { kind: 'delete-remote', path: P, id: 'mem_1', expectedSha: A },
    outcome: { ok: false, failure: 'precondition' },
    expect: (next) => {
      expect(next.baseline[P]).toEqual({ id: 'mem_1', sha: A });
      expect(next.pendingDeletes[P]).toBeUndefined();
    },
  },
  {
    description: 'a transient remote delete failure stays pending',
    action: { kind: 'delete-remote', path: P, id: 'mem_1', expectedSha: A },
    outcome: { ok: false, failure: 'transient' },
    expect: (next, before) => expect(next).toEqual(before),
  },
  {
    description: 'a local delete done drops the path',
    action: { kind: 'delete-local', path: P, expectedLocalSha: A },
    outcome: { ok: true },
    expect: (next) => expect(next.baseline[P]).toBeUndefined(),
  },
  {
    description: 'a local delete skipped because the file changed keeps the path for the next sync',
    action: { kind: 'delete-local', path: P, expectedLocalSha: A },
    outcome: { ok: false, failure: 'precondition' },
    expect: (next, before) => expect(next).toEqual(withoutPending(before)),
  },
  {
    description: 'an await-delete keeps the generation first recorded for the same base',
    action: { kind: 'await-delete', path: P, baseSha: A, capped: true },
    outcome: { ok: true },
    expect: (next) => expect(next.pendingDeletes[P]).toEqual({ sinceGeneration: 5, baseSha: A }),
  },
  {
    description: 'an await-delete for another base starts a new wait at the current generation',
    action: { kind: 'await-delete', path: P, baseSha: B, capped: false },
    outcome: { ok: true },
    expect: (next) => expect(next.pendingDeletes[P]).toEqual({ sinceGeneration: 7, baseSha: B }),
  },
  {
    description: 'a would-delete is logged once: the deletion is recorded as refused and no longer pending',
    action: { kind: 'would-delete-remote', path: P, id: 'mem_1' },
    outcome: { ok: true },
    expect: (next) => {
      expect(next.refused[P]?.fingerprint).toBe(DELETED_FINGERPRINT);
      expect(next.pendingDeletes[P]).toBeUndefined();
      expect(next.baseline[P]).toEqual({ id: 'mem_1', sha: A });
    },
  },
  {
    description: 'a refuse records the version and reason',
    action: { kind: 'refuse', path: P, reason: 'not UTF-8', fingerprint: '12:34:56' },
    outcome: { ok: true },
    expect: (next) => expect(next.refused[P]).toEqual({ fingerprint: '12:34:56', reason: 'not UTF-8' }),
  },
  {
    description: 'an adopt records the shared version and clears the rest',
    action: { kind: 'adopt', path: P, id: 'mem_2', sha: C },
    outcome: { ok: true },
    expect: (next) => {
      expect(next.baseline[P]).toEqual({ id: 'mem_2', sha: C });
      cleared(next);
    },
  },
  {
    description: 'a forget drops the path',
    action: { kind: 'forget', path: P },
    outcome: { ok: true },
    expect: (next) => {
      expect(next.baseline[P]).toBeUndefined();
      cleared(next);
    },
  },
  {
    description: 'a noop clears a stale pending delete and nothing else',
    action: { kind: 'noop', path: P },
    outcome: { ok: true },
    expect: (next) => {
      expect(next.pendingDeletes[P]).toBeUndefined();
      expect(next.refused[P]).toEqual({ fingerprint: C, reason: '413' });
      expect(next.baseline[P]).toEqual({ id: 'mem_1', sha: A });
    },
  },
];

describe('applyOutcome', () => {
  for (const row of rows) {
    it(row.description, () => {
      const before = deepFreeze(busyState());
      const next = applyOutcome(before, row.action, row.outcome);
      row.expect(next, before);
      expect(before).toEqual(busyState()); // input untouched (frozen, so a write would throw)
    });
  }

  it(`keeps at most ${MAX_SENT_SHAS_PER_PATH} sent shas per path, newest last, without duplicates`, () => {
    let state = createSyncState({ storeId: 's', root: '/r', access: 'read_write' });
    const shas = ['1', '2', '3', '2', '4', '5'].map((c) => c.repeat(64));
    for (const sha of shas) {
      state = applyOutcome(state, { kind: 'push-create', path: P, sha }, { ok: false, failure: 'lost-response' });
    }
    expect(state.sentShas[P]).toEqual(['3', '2', '4', '5'].map((c) => c.repeat(64)));
  });
});

describe('applyOutcomes', () => {
  it('gives, for every row above, the state applyOutcome gives, and leaves its input untouched', () => {
    for (const row of rows) {
      const before = deepFreeze(busyState());
      expect(applyOutcomes(before, [[row.action, row.outcome]]), row.description).toEqual(
        applyOutcome(busyState(), row.action, row.outcome),
      );
    }
  });

  it('applies many steps on several paths as applyOutcome one step at a time would, without touching its input', () => {
    const base = createSyncState({
      storeId: 's',
      root: '/r',
      access: 'read_write',
      baseline: { 'keep.md': { id: 'mem_k', sha: A }, 'gone.md': { id: 'mem_g', sha: A } },
    });
    const before = deepFreeze({
      ...base,
      pendingDeletes: { 'gone.md': { sinceGeneration: 0, baseSha: A } },
      refused: { 'r.md': { fingerprint: B, reason: '413' } },
    });
    const steps: Array<[SyncAction, ActionOutcome]> = [
      ...Array.from({ length: 50 }, (_, i): [SyncAction, ActionOutcome] => [
        { kind: 'push-create', path: `new-${i}.md`, sha: B },
        { ok: true, id: `mem_${i}`, sha: B },
      ]),
      [{ kind: 'delete-remote', path: 'gone.md', id: 'mem_g', expectedSha: A }, { ok: true }],
      [
        { kind: 'push-create', path: 'lost.md', sha: C },
        { ok: false, failure: 'lost-response' },
      ],
      [
        { kind: 'push-create', path: 'r.md', sha: C },
        { ok: false, failure: 'refused', reason: '400' },
      ],
      [{ kind: 'noop', path: 'keep.md' }, { ok: true }],
    ];
    let oneByOne: StoreSyncState = before;
    for (const [action, outcome] of steps) oneByOne = applyOutcome(oneByOne, action, outcome);
    const batched = applyOutcomes(before, steps);
    expect(batched).toEqual(oneByOne);
    expect(Object.keys(batched.baseline)).toHaveLength(51);
    expect(batched.baseline['gone.md']).toBeUndefined();
    expect(before.baseline['new-0.md']).toBeUndefined();
  });

  it('keeps a path named __proto__ as a path of its own, in a copied record and in one a batch changes', () => {
    const copied = createSyncState({
      storeId: 's',
      root: '/r',
      access: 'read_write',
      baseline: JSON.parse(`{"__proto__":{"id":"mem_p","sha":"${A}"}}`),
    });
    expect(Object.hasOwn(copied.baseline, '__proto__')).toBe(true);
    const after = applyOutcomes(createSyncState({ storeId: 's', root: '/r', access: 'read_write' }), [
      [
        { kind: 'push-create', path: 'a.md', sha: B },
        { ok: true, id: 'mem_a', sha: B },
      ],
      [
        { kind: 'push-create', path: '__proto__', sha: C },
        { ok: true, id: 'mem_p', sha: C },
      ],
    ]);
    expect(Object.hasOwn(after.baseline, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(after.baseline)).toBe(Object.prototype);
    expect(JSON.parse(serializeSyncState(after)).baseline).toEqual(
      JSON.parse(`{"a.md":{"id":"mem_a","sha":"${B}"},"__proto__":{"id":"mem_p","sha":"${C}"}}`),
    );
  });

  it('hands back records that a later transition copies instead of changing', () => {
    const first = applyOutcomes(createSyncState({ storeId: 's', root: '/r', access: 'read_write' }), [
      [
        { kind: 'push-create', path: 'a.md', sha: A },
        { ok: true, id: 'mem_a', sha: A },
      ],
    ]);
    const second = applyOutcome(first, { kind: 'push-create', path: 'b.md', sha: B }, { ok: true, id: 'mem_b', sha: B });
    expect(Object.keys(first.baseline)).toEqual(['a.md']);
    expect(Object.keys(second.baseline)).toEqual(['a.md', 'b.md']);
  });
});

describe('pulls the folder cannot hold', () => {
  const pull: SyncAction = { kind: 'pull', path: P, id: 'mem_1', sha: B, why: 'remote-changed' };
  const blocked: ActionOutcome = { ok: false, failure: 'blocked', reason: 'notes is a file here, where the store has a folder' };
  const rows: Array<{
    description: string;
    before?: Record<string, string>;
    outcome: ActionOutcome;
    after: Record<string, string> | undefined;
  }> = [
    { description: 'a blocked pull remembers the listed version', outcome: blocked, after: { [P]: B } },
    { description: 'a newer listed version blocked replaces the older one', before: { [P]: A }, outcome: blocked, after: { [P]: B } },
    { description: 'a pull that lands ends the block', before: { [P]: B }, outcome: { ok: true, id: 'mem_1', sha: B }, after: undefined },
    {
      description: 'a pull that fails for another reason ends the block too (the folder could hold it)',
      before: { [P]: B },
      outcome: { ok: false, failure: 'transient' },
      after: undefined,
    },
    {
      description: 'the blocks of other paths stay',
      before: { [P]: B, 'x.md': A },
      outcome: { ok: true, id: 'mem_1', sha: B },
      after: { 'x.md': A },
    },
  ];
  it.each(rows)('$description', ({ before, outcome, after }) => {
    const state = deepFreeze({ ...busyState(), ...(before ? { blockedPulls: before } : {}) });
    const next = applyOutcome(state, pull, outcome);
    expect(next.blockedPulls).toEqual(after);
    if (!outcome.ok) expect(next.baseline[P]).toEqual({ id: 'mem_1', sha: A });
  });

  it('an upload reporting blocked records nothing but the end of its pending delete, as a transient failure does', () => {
    const push: SyncAction = { kind: 'push-update', path: P, id: 'mem_1', sha: B, expectedSha: A };
    expect(applyOutcome(busyState(), push, blocked)).toEqual({ ...busyState(), pendingDeletes: {} });
  });

  it('survives a JSON round trip, and a state without it reads back without it', () => {
    const state = { ...busyState(), blockedPulls: { [P]: B } };
    expect(parseSyncState(serializeSyncState(state))).toEqual(state);
    expect(parseSyncState(serializeSyncState(busyState())).blockedPulls).toBeUndefined();
    expect(() => parseSyncState(JSON.stringify({ ...busyState(), blockedPulls: { [P]: 1 } }))).toThrow(`"blockedPulls.${P}"`);
  });
});

describe('generations', () => {
  const rowsGen = [
    { description: 'a routine sync counts as a generation', phase: 'sync' as const, expected: 8 },
    { description: 'the final sync counts as a generation', phase: 'final' as const, expected: 8 },
    { description: 'the push-only flush does not', phase: 'flush' as const, expected: 7 },
  ];
  for (const row of rowsGen) {
    it(row.description, () => expect(completeGeneration(busyState(), row.phase).generation).toBe(row.expected));
  }

  it('confirms a deletion only at a sync after the one that first saw it missing', () => {
    const base = createSyncState({ storeId: 's', root: '/r', access: 'read_write', baseline: { [P]: { id: 'mem_1', sha: A } } });
    const input = (state: StoreSyncState) => ({
      state,
      local: new Map(),
      remote: new Map([[P, { id: 'mem_1', sha: A }]]),
      deletions: 'enabled' as const,
      phase: 'sync' as const,
    });
    const first = planSync(input(base)).actions[0]!;
    expect(first.kind).toBe('await-delete');
    let state = applyOutcome(base, first, { ok: true });
    // The same generation (sync aborted before completing) does not confirm.
    expect(planSync(input(state)).actions[0]?.kind).toBe('await-delete');
    state = completeGeneration(state, 'sync');
    expect(planSync(input(state)).actions[0]).toEqual({ kind: 'delete-remote', path: P, id: 'mem_1', expectedSha: A });
  });
});

describe('pending deletes across syncs', () => {
  it('a file seen again, whose upload then failed, is not deleted remotely at first sight of its next removal', () => {
    const remote = new Map([[P, { id: 'mem_1', sha: A }]]);
    const plan = (state: StoreSyncState, local: Map<string, { kind: 'file'; sha: string; size: number }>) =>
      planSync({ state, local, remote, deletions: 'enabled', phase: 'sync' }).actions[0]!;
    let state = createSyncState({ storeId: 's', root: '/r', access: 'read_write', baseline: { [P]: { id: 'mem_1', sha: A } } });
    // sync 1: the file is missing → pending
    let action = plan(state, new Map());
    state = completeGeneration(applyOutcome(state, action, { ok: true }), 'sync');
    // sync 2: the file is back with new bytes; the upload fails transiently
    action = plan(state, new Map([[P, { kind: 'file', sha: B, size: 1 }]]));
    expect(action.kind).toBe('push-update');
    state = completeGeneration(applyOutcome(state, action, { ok: false, failure: 'transient' }), 'sync');
    // sync 3: missing again → waits again instead of deleting
    expect(plan(state, new Map())).toEqual({ kind: 'await-delete', path: P, baseSha: A, capped: false });
  });
});

describe('creating and persisting the state', () => {
  it('starts at generation 0 with nothing pending, sent or refused', () => {
    const state = createSyncState({
      storeId: 'memstore_1',
      root: '/mnt/memory/a',
      access: 'read_only',
      baseline: { [P]: { id: 'm', sha: A } },
    });
    expect(state).toEqual({
      storeId: 'memstore_1',
      root: '/mnt/memory/a',
      access: 'read_only',
      generation: 0,
      baseline: { [P]: { id: 'm', sha: A } },
      pendingDeletes: {},
      sentShas: {},
      refused: {},
      shadowed: {},
    });
  });

  it('survives a JSON round trip unchanged', () => {
    const state = busyState();
    state.shadowed['A.md'] = { reason: 'case collision' };
    expect(parseSyncState(serializeSyncState(state))).toEqual(state);
  });

  it('clones deeply', () => {
    const state = busyState();
    const copy = cloneSyncState(state);
    copy.baseline[P]!.sha = B;
    expect(state.baseline[P]!.sha).toBe(A);
  });

  const bad = [
    { description: 'rejects a non-object', text: '[]', field: '(root)' },
    { description: 'rejects a wrong access mode', text: JSON.stringify({ ...busyState(), access: 'rw' }), field: 'access' },
    { description: 'rejects a negative generation', text: JSON.stringify({ ...busyState(), generation: -1 }), field: 'generation' },
    {
      description: 'rejects a baseline entry without a sha',
      text: JSON.stringify({ ...busyState(), baseline: { x: { id: 'm' } } }),
      field: 'baseline.x',
    },
    {
      description: 'rejects sent shas that are not a string list',
      text: JSON.stringify({ ...busyState(), sentShas: { x: 'abc' } }),
      field: 'sentShas.x',
    },
    { description: 'rejects a missing shadowed map', text: JSON.stringify({ ...busyState(), shadowed: undefined }), field: 'shadowed' },
  ];
  for (const row of bad) {
    it(`${row.description}, naming the field`, () => {
      expect(() => parseSyncState(row.text)).toThrow(`"${row.field}"`);
    });
  }
});
