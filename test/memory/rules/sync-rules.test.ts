// Pins the decisions a sync makes around the plan: which listed memories a folder can hold
// (unusable names, shadowed paths, case collisions on a case-insensitive folder), which
// path-conflict refusals end once the overlapping memory is gone, whether a flush has local
// changes to send, what is unsaved at the end, which deletions a clean end carries over, and the
// fix each skip warning names.
import { describe, expect, it } from 'vitest';
import type { SkippedEntry } from '../../../src/memory/rules/scan.js';
import type { LocalEntry } from '../../../src/memory/rules/plan.js';
import { PATH_CONFLICT_REASON_PREFIX } from '../../../src/memory/rules/path-conflict.js';
import { createSyncState } from '../../../src/memory/rules/sync-state.js';
import {
  carriedDeletes,
  hasLocalChanges,
  isSettledRefusal,
  releaseResolvedPathConflicts,
  remoteView,
  skipFix,
  unsavedInScan,
  warnsSkip,
  type UnsavedPath,
} from '../../../src/memory/rules/sync-rules.js';
import type { StoreSyncState } from '../../../src/memory/rules/types.js';

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);
const CONFLICT = `${PATH_CONFLICT_REASON_PREFIX}/notes`;

function state(over: Partial<StoreSyncState> = {}): StoreSyncState {
  return { ...createSyncState({ storeId: 'memstore_1', root: '/mnt/memory/x', access: 'read_write' }), ...over };
}

const mem = (path: string, id = `mem_${path}`) => ({ path, id, sha: A });

describe('remoteView', () => {
  const rows: Array<{
    description: string;
    listed: string[];
    baseline?: string[];
    shadowed?: Record<string, { reason: string }>;
    caseInsensitive?: boolean;
    kept: string[];
    shadowedAfter: string[];
    newly: string[];
  }> = [
    {
      description: 'usable paths are keyed without their leading slash',
      listed: ['/a.md', '/notes/b.md'],
      kept: ['a.md', 'notes/b.md'],
      shadowedAfter: [],
      newly: [],
    },
    {
      description: 'a path that escapes the root is shadowed and warned once',
      listed: ['/../x.md', '/a.md'],
      kept: ['a.md'],
      shadowedAfter: ['/../x.md'],
      newly: ['/../x.md'],
    },
    {
      description: 'a path shadowed before stays shadowed without a new warning',
      listed: ['/A.md'],
      shadowed: { 'A.md': { reason: 'case collision' } },
      kept: [],
      shadowedAfter: ['A.md'],
      newly: [],
    },
    {
      description: 'a shadowed path no longer listed is dropped from the shadowed set',
      listed: ['/a.md'],
      shadowed: { 'gone.md': { reason: 'case collision' } },
      kept: ['a.md'],
      shadowedAfter: [],
      newly: [],
    },
    {
      description: 'case variants both stay on a case-sensitive folder',
      listed: ['/A.md', '/a.md'],
      kept: ['A.md', 'a.md'],
      shadowedAfter: [],
      newly: [],
    },
    {
      description: 'on a case-insensitive folder one spelling of a collision is kept',
      listed: ['/A.md', '/a.md'],
      caseInsensitive: true,
      kept: ['A.md'],
      shadowedAfter: ['a.md'],
      newly: ['a.md'],
    },
    {
      description: 'on a case-insensitive folder the spelling the baseline holds wins against a newcomer',
      listed: ['/A.md', '/a.md'],
      baseline: ['a.md'],
      caseInsensitive: true,
      kept: ['a.md'],
      shadowedAfter: ['A.md'],
      newly: ['A.md'],
    },
    {
      description: 'on a case-insensitive folder a baseline spelling that sorts first wins too',
      listed: ['/A.md', '/a.md'],
      baseline: ['A.md'],
      caseInsensitive: true,
      kept: ['A.md'],
      shadowedAfter: ['a.md'],
      newly: ['a.md'],
    },
    {
      description: 'a newcomer in a folder the baseline spells otherwise is shadowed',
      listed: ['/notes/a.md', '/Notes/b.md'],
      baseline: ['notes/a.md'],
      caseInsensitive: true,
      kept: ['notes/a.md'],
      shadowedAfter: ['Notes/b.md'],
      newly: ['Notes/b.md'],
    },
    {
      description: 'newcomers colliding among themselves keep the first spelling',
      listed: ['/b.md', '/x.md', '/X.md'],
      baseline: ['b.md'],
      caseInsensitive: true,
      kept: ['X.md', 'b.md'],
      shadowedAfter: ['x.md'],
      newly: ['x.md'],
    },
  ];
  it.each(rows)('$description', ({ listed, baseline, shadowed, caseInsensitive, kept, shadowedAfter, newly }) => {
    const s = state({
      baseline: Object.fromEntries((baseline ?? []).map((p) => [p, { id: `mem_/${p}`, sha: A }])),
      shadowed: shadowed ?? {},
    });
    const view = remoteView(
      listed.map((p) => mem(p)),
      s,
      caseInsensitive ?? false,
    );
    expect([...view.byRel.keys()].sort()).toEqual(kept);
    expect([...view.remote.keys()].sort()).toEqual(kept);
    expect(Object.keys(view.shadowed).sort()).toEqual(shadowedAfter);
    expect(view.newlyShadowed.map((n) => n.path)).toEqual(newly);
  });

  it('names the kept spelling in the reason of a shadowed newcomer', () => {
    const view = remoteView([mem('/A.md'), mem('/a.md')], state({ baseline: { 'a.md': { id: 'mem_/a.md', sha: A } } }), true);
    expect(view.shadowed['A.md']?.reason).toContain('"a.md" is kept and "A.md" is not synced');
  });

  it('keeps the reason recorded when a path was first shadowed', () => {
    const view = remoteView([mem('/A.md')], state({ shadowed: { 'A.md': { reason: 'first reason' } } }), true);
    expect(view.shadowed['A.md']).toEqual({ reason: 'first reason' });
  });
});

describe('releaseResolvedPathConflicts', () => {
  const rows: Array<{ description: string; refused: string; listed: string[]; released: boolean }> = [
    {
      description: 'a file refused under a listed memory (a file where the folder goes) stays refused',
      refused: 'notes/a.md',
      listed: ['notes'],
      released: false,
    },
    {
      description: 'a file refused over a listed folder of memories stays refused',
      refused: 'notes',
      listed: ['notes/a.md'],
      released: false,
    },
    { description: 'a deeper overlapping memory keeps the refusal', refused: 'notes/x/a.md', listed: ['notes'], released: false },
    { description: 'once the overlapping memory is gone the refusal ends', refused: 'notes/a.md', listed: ['other.md'], released: true },
    { description: 'a sibling with a common prefix is no overlap', refused: 'notes', listed: ['notes2/a.md'], released: true },
  ];
  it.each(rows)('$description', ({ refused, listed, released }) => {
    const s = state({ refused: { [refused]: { fingerprint: A, reason: CONFLICT } } });
    const next = releaseResolvedPathConflicts(s, new Map(listed.map((p) => [p, {}])));
    expect(Object.hasOwn(next.refused, refused)).toBe(!released);
    expect(Object.hasOwn(s.refused, refused)).toBe(true);
  });

  it('never releases a refusal for another reason', () => {
    const s = state({ refused: { 'a.bin': { fingerprint: A, reason: 'not UTF-8 text' } } });
    expect(releaseResolvedPathConflicts(s, new Map())).toBe(s);
  });
});

describe('local changes a flush sends', () => {
  const file = (sha: string): LocalEntry => ({ kind: 'file', sha, size: 1 });
  const rows: Array<{ description: string; s: StoreSyncState; entries: Array<[string, LocalEntry]>; expected: boolean }> = [
    {
      description: 'a file as the baseline has it is no change',
      s: state({ baseline: { 'a.md': { id: 'm', sha: A } } }),
      entries: [['a.md', file(A)]],
      expected: false,
    },
    {
      description: 'an edited file is a change',
      s: state({ baseline: { 'a.md': { id: 'm', sha: A } } }),
      entries: [['a.md', file(B)]],
      expected: true,
    },
    { description: 'a new file is a change', s: state(), entries: [['a.md', file(A)]], expected: true },
    {
      description: 'a version refused for good is no change',
      s: state({ refused: { 'a.md': { fingerprint: B, reason: 'too large' } } }),
      entries: [['a.md', file(B)]],
      expected: false,
    },
    {
      description: 'a version refused for a path conflict is still a change',
      s: state({ refused: { 'a.md': { fingerprint: B, reason: CONFLICT } } }),
      entries: [['a.md', file(B)]],
      expected: true,
    },
    {
      description: 'a newer version than the refused one is a change',
      s: state({ refused: { 'a.md': { fingerprint: A, reason: 'too large' } } }),
      entries: [['a.md', file(B)]],
      expected: true,
    },
    {
      description: 'an unsyncable file is nothing a flush can send',
      s: state(),
      entries: [['a.bin', { kind: 'unsyncable', reason: 'binary', fingerprint: '1:2:3' }]],
      expected: false,
    },
  ];
  it.each(rows)('$description', ({ s, entries, expected }) => {
    expect(hasLocalChanges(s, new Map(entries))).toBe(expected);
  });

  it('a settled refusal is one of the same version for a lasting reason', () => {
    const s = state({ refused: { 'a.md': { fingerprint: A, reason: 'too large' }, 'b.md': { fingerprint: A, reason: CONFLICT } } });
    expect(isSettledRefusal(s, 'a.md', A)).toBe(true);
    expect(isSettledRefusal(s, 'a.md', B)).toBe(false);
    expect(isSettledRefusal(s, 'b.md', A)).toBe(false);
  });
});

describe('unsavedInScan', () => {
  const s = state({
    baseline: { 'same.md': { id: 'm1', sha: A }, 'edit.md': { id: 'm2', sha: A } },
    refused: { 'big.md': { fingerprint: B, reason: 'too large' } },
  });
  const entries = new Map<string, LocalEntry>([
    ['same.md', { kind: 'file', sha: A, size: 1 }],
    ['edit.md', { kind: 'file', sha: B, size: 1 }],
    ['big.md', { kind: 'file', sha: B, size: 1 }],
    ['bin.dat', { kind: 'unsyncable', reason: 'binary', fingerprint: 'f' }],
  ]);
  const skipped: SkippedEntry[] = [
    { rel: 'locked.md', kind: 'unreadable' },
    { rel: 'pipe', kind: 'fifo' },
    { rel: 'gone.md', kind: 'vanished' },
  ];
  const rows: Array<{ description: string; writable: boolean; expected: UnsavedPath[] }> = [
    {
      description: 'a writable store: edits are uploads left undone; refused, unsyncable, reserved and unreadable entries are not',
      writable: true,
      expected: [
        { rel: 'edit.md', upload: true, copyable: true },
        { rel: 'big.md', upload: false, copyable: true },
        { rel: 'bin.dat', upload: false, copyable: true },
        { rel: '.maw-tmp-x', upload: false, copyable: true },
        { rel: 'locked.md', upload: false, copyable: false },
      ],
    },
    {
      description: 'a read-only store: every difference is kept aside, none is an upload left undone',
      writable: false,
      expected: [
        { rel: 'edit.md', upload: false, copyable: true },
        { rel: 'big.md', upload: false, copyable: true },
        { rel: 'bin.dat', upload: false, copyable: true },
        { rel: '.maw-tmp-x', upload: false, copyable: true },
        { rel: 'locked.md', upload: false, copyable: false },
      ],
    },
  ];
  it.each(rows)('$description', ({ writable, expected }) => {
    expect(unsavedInScan(s, { entries, reserved: ['.maw-tmp-x'], skipped }, writable)).toEqual(expected);
  });
});

describe('carriedDeletes', () => {
  const base = { 'a.md': { id: 'm1', sha: A }, 'b.md': { id: 'm2', sha: A }, 'c.md': { id: 'm3', sha: A } };
  const rows: Array<{ description: string; s: StoreSyncState; gone: string[]; expected: string[] }> = [
    { description: 'files gone at the end are carried', s: state({ baseline: base }), gone: ['a.md'], expected: ['a.md'] },
    { description: 'nothing gone carries nothing', s: state({ baseline: base }), gone: [], expected: [] },
    {
      description: 'a refused path is never carried',
      s: state({ baseline: base, refused: { 'a.md': { fingerprint: '<deleted>', reason: 'read-only' } } }),
      gone: ['a.md', 'b.md'],
      expected: ['b.md'],
    },
    {
      description: 'a folder emptied whole is a wipe: nothing is carried',
      s: state({ baseline: base }),
      gone: ['a.md', 'b.md', 'c.md'],
      expected: [],
    },
    {
      description: 'the only file of a one-file store gone is a deletion, not a wipe',
      s: state({ baseline: { 'a.md': { id: 'm1', sha: A } } }),
      gone: ['a.md'],
      expected: ['a.md'],
    },
  ];
  it.each(rows)('$description', ({ s, gone, expected }) => {
    const carried = carriedDeletes(s, new Set(gone));
    expect(Object.keys(carried).sort()).toEqual(expected);
    for (const p of expected) expect(carried[p]).toEqual(s.baseline[p]);
  });
});

describe('skip warnings', () => {
  const where = '/mnt/memory/x/e';
  const rows: Array<{ description: string; kind: SkippedEntry['kind']; fix: string; warned: boolean }> = [
    {
      description: 'a symlink is replaced by a regular file',
      kind: 'symlink',
      fix: `replace ${where} with a regular file (or remove it) to sync it`,
      warned: true,
    },
    {
      description: 'a FIFO is replaced by a regular file',
      kind: 'fifo',
      fix: `replace ${where} with a regular file (or remove it) to sync it`,
      warned: true,
    },
    {
      description: 'a socket is replaced by a regular file',
      kind: 'socket',
      fix: `replace ${where} with a regular file (or remove it) to sync it`,
      warned: true,
    },
    {
      description: 'a device is replaced by a regular file',
      kind: 'device',
      fix: `replace ${where} with a regular file (or remove it) to sync it`,
      warned: true,
    },
    {
      description: 'an unreadable entry is made readable',
      kind: 'unreadable',
      fix: `make ${where} readable by the worker's user (chmod u+rX)`,
      warned: true,
    },
    {
      description: 'an over-long path is shortened',
      kind: 'too-long',
      fix: `shorten the path of ${where} (it is longer than this system allows)`,
      warned: true,
    },
    {
      description: 'a too-deep path moves closer to the root',
      kind: 'too-deep',
      fix: `move ${where} closer to the store root: a memory path has at most 20 segments`,
      warned: true,
    },
    {
      description: 'a name that is not UTF-8 is renamed',
      kind: 'unreadable-name',
      fix: `rename ${where} to a valid UTF-8 name`,
      warned: true,
    },
    {
      description: 'an entry that changed during the scan is not warned about',
      kind: 'vanished',
      fix: 'none: it changed during the scan',
      warned: false,
    },
  ];
  it.each(rows)('$description', ({ kind, fix, warned }) => {
    expect(skipFix(kind, where)).toBe(fix);
    expect(warnsSkip(kind)).toBe(warned);
  });
});
