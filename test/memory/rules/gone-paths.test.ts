// Pins which baseline files the end of a session checks for being gone: only those its last scan
// did not see in any form, refused ones never.
import type { BigIntStats } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { goneCandidates } from '../../../src/memory/rules/gone-paths.js';
import type { SkippedEntry } from '../../../src/memory/rules/scan.js';

const SHA = 'a'.repeat(64);
const stat = {} as BigIntStats;

interface Row {
  description: string;
  baseline: string[];
  refused?: string[];
  scanned?: string[];
  reserved?: string[];
  skipped?: SkippedEntry[];
  expected: string[];
}

const rows: Row[] = [
  { description: 'a file the scan saw is not a candidate', baseline: ['a.md', 'b.md'], scanned: ['a.md'], expected: ['b.md'] },
  { description: 'every baseline file is a candidate when the scan saw none', baseline: ['a.md', 'd/b.md'], expected: ['a.md', 'd/b.md'] },
  { description: 'a refused path is never a candidate', baseline: ['a.md', 'b.md'], refused: ['b.md'], expected: ['a.md'] },
  {
    description: 'a skipped entry (FIFO, symlink) at the path is there',
    baseline: ['a.md'],
    skipped: [{ rel: 'a.md', kind: 'fifo' }],
    expected: [],
  },
  {
    description: 'a path below a skipped folder is there',
    baseline: ['d/a.md', 'e.md'],
    skipped: [{ rel: 'd', kind: 'unreadable' }],
    expected: ['e.md'],
  },
  {
    description: 'an unreadable root hides every path',
    baseline: ['d/a.md', 'e.md'],
    skipped: [{ rel: '', kind: 'unreadable' }],
    expected: [],
  },
  { description: 'a reserved temp name at the path is there', baseline: ['a.md'], reserved: ['a.md'], expected: [] },
  { description: 'a new file the baseline does not know is never a candidate', baseline: [], scanned: ['new.md'], expected: [] },
];

describe('goneCandidates', () => {
  for (const row of rows) {
    it(row.description, () => {
      const state = {
        baseline: Object.fromEntries(row.baseline.map((p) => [p, { id: `mem_${p}`, sha: SHA }])),
        refused: Object.fromEntries((row.refused ?? []).map((p) => [p, { fingerprint: SHA, reason: '413' }])),
      };
      const scan = { stats: new Map((row.scanned ?? []).map((p) => [p, stat])), reserved: row.reserved ?? [], skipped: row.skipped ?? [] };
      expect(goneCandidates(state, scan)).toEqual(row.expected);
    });
  }
});
