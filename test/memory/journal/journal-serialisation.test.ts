/**
 * Pins when a store's journal entry is rewritten: not when only the generation moved, nor when a
 * sync handed back the same parts of the state; yes when any part changed, even to an equal-looking
 * copy holding another value; an equal copy is recognised by its digest; after a reset, always.
 */
import { describe, expect, it } from 'vitest';
import { JournalChangeCheck, sameJournalState } from '../../../src/memory/journal/journal-serialisation.js';
import type { StoreSyncState } from '../../../src/memory/rules/types.js';

const base: StoreSyncState = {
  storeId: 'memstore_1',
  root: '/mnt/memory/notes',
  access: 'read_write',
  generation: 3,
  baseline: { 'a.md': { id: 'mem_a', sha: 'a'.repeat(64) } },
  pendingDeletes: {},
  sentShas: {},
  refused: {},
  shadowed: {},
};

describe('sameJournalState', () => {
  const rows: Array<{ description: string; other: StoreSyncState; same: boolean }> = [
    { description: 'the same object', other: base, same: true },
    { description: 'only the generation moved', other: { ...base, generation: 4 }, same: true },
    {
      description: 'a baseline copied with another sha',
      other: { ...base, baseline: { 'a.md': { id: 'mem_a', sha: 'b'.repeat(64) } } },
      same: false,
    },
    {
      description: 'an equal baseline in another object (decided by the digest)',
      other: { ...base, baseline: { ...base.baseline } },
      same: false,
    },
    { description: 'a field added', other: { ...base, blockedPulls: {} }, same: false },
    { description: 'another access', other: { ...base, access: 'read_only' }, same: false },
  ];
  for (const row of rows) {
    it(row.description, () => {
      expect(sameJournalState(base, row.other)).toBe(row.same);
    });
  }
});

describe('JournalChangeCheck', () => {
  it('reports a change first, none for the same parts or an equal copy, one for another value, and one after a reset', () => {
    const check = new JournalChangeCheck();
    const first = check.changed(base);
    expect(first).toBeDefined();
    check.written(base, first!.digest);

    expect(check.changed({ ...base, generation: 9 })).toBeUndefined();
    expect(check.changed({ ...base, baseline: { ...base.baseline } })).toBeUndefined();
    const edited = { ...base, refused: { 'b.md': { fingerprint: 'f', reason: 'binary' } } };
    expect(check.changed(edited)).toBeDefined();

    check.reset();
    expect(check.changed(base)).toBeDefined();
  });

  it('keeps reporting a change until the write is recorded', () => {
    const check = new JournalChangeCheck();
    expect(check.changed(base)).toBeDefined();
    expect(check.changed(base)).toBeDefined();
  });
});
