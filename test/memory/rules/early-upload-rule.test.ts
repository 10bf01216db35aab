// Pins which new files the final sync uploads while its scan still runs: only a file no other path
// can affect, for which the planner alone says push-create; everything else, and every file of a
// routine sync or a flush, waits for the plan.
import { describe, expect, it } from 'vitest';
import { earlyUpload, earlyUploadIndex } from '../../../src/memory/rules/early-upload-rule.js';
import type { LocalEntry, RemoteEntry } from '../../../src/memory/rules/plan.js';
import { createSyncState } from '../../../src/memory/rules/sync-state.js';
import type { StoreSyncState } from '../../../src/memory/rules/types.js';

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);
const file: LocalEntry = { kind: 'file', sha: B, size: 10 };

interface Row {
  description: string;
  rel: string;
  entry?: LocalEntry;
  state?: Partial<StoreSyncState>;
  remote?: Record<string, RemoteEntry>;
  caseInsensitive?: boolean;
  phase?: 'sync' | 'final' | 'flush';
  early: boolean;
}

const base = { 'known.md': { id: 'mem_k', sha: A }, 'dir/known.md': { id: 'mem_d', sha: A } };

const rows: Row[] = [
  { description: 'a new file no path overlaps goes early', rel: 'new/n.md', early: true },
  { description: 'a new file at the top goes early', rel: 'n.md', early: true },
  { description: 'nothing goes early in a routine sync', rel: 'n.md', phase: 'sync', early: false },
  { description: 'nothing goes early in a flush', rel: 'n.md', phase: 'flush', early: false },
  { description: 'a file the baseline knows waits for the plan', rel: 'known.md', early: false },
  { description: 'a file the listing shows waits for the plan', rel: 'r.md', remote: { 'r.md': { id: 'mem_r', sha: A } }, early: false },
  {
    description: 'a file where the listing has a folder waits',
    rel: 'rdir',
    remote: { 'rdir/x.md': { id: 'mem_x', sha: A } },
    early: false,
  },
  { description: 'a file where the baseline has a folder waits', rel: 'dir', early: false },
  { description: 'a file below a listed file waits', rel: 'r.md/x.md', remote: { 'r.md': { id: 'mem_r', sha: A } }, early: false },
  { description: 'a file below a baseline file waits', rel: 'known.md/x.md', early: false },
  { description: 'a file beside baseline files in the same folder goes early', rel: 'dir/other.md', early: true },
  {
    description: 'a file with a pending delete waits',
    rel: 'p.md',
    state: { pendingDeletes: { 'p.md': { sinceGeneration: 0, baseSha: A } } },
    early: false,
  },
  { description: 'a file whose upload response was lost waits', rel: 's.md', state: { sentShas: { 's.md': [B] } }, early: false },
  { description: 'a refused file waits', rel: 'x.md', state: { refused: { 'x.md': { fingerprint: B, reason: '413' } } }, early: false },
  { description: 'a shadowed path waits', rel: 'S.md', state: { shadowed: { 'S.md': { reason: 'case collision' } } }, early: false },
  {
    description: 'an unsyncable file waits (the plan refuses it)',
    rel: 'bin.dat',
    entry: { kind: 'unsyncable', reason: 'not UTF-8', fingerprint: 'f' },
    early: false,
  },
  { description: 'a read-only store never uploads', rel: 'n.md', state: { access: 'read_only' }, early: false },
  { description: 'nothing goes early on a case-insensitive folder', rel: 'n.md', caseInsensitive: true, early: false },
  { description: 'a path the planner refuses waits', rel: 'bad\u0001.md', early: false },
];

describe('earlyUpload', () => {
  for (const row of rows) {
    it(row.description, () => {
      const state: StoreSyncState = {
        ...createSyncState({ storeId: 's', root: '/r', access: 'read_write', baseline: base }),
        ...row.state,
      };
      const index = earlyUploadIndex({
        state,
        remote: new Map(Object.entries(row.remote ?? {})),
        deletions: 'enabled',
        caseInsensitive: row.caseInsensitive ?? false,
        phase: row.phase ?? 'final',
      });
      const action = earlyUpload(index, row.rel, row.entry ?? file);
      if (row.early) expect(action).toEqual({ kind: 'push-create', path: row.rel, sha: B });
      else expect(action).toBeUndefined();
    });
  }
});
