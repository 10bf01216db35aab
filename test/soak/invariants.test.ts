/**
 * Pins the soak's verdict: an edit counts as saved when the store holds it, held it before a later
 * write replaced it, or the state folder kept a copy, and as lost otherwise; agent content written
 * twice or to a path the agent never used is a duplicate; a tool call run twice, an acknowledged item
 * not stopped, an unhandled rejection, a leftover folder and a session that never ended each break
 * an invariant.
 */
import { describe, expect, it } from 'vitest';
import { judgeSoak, type SoakObservation } from '../../bench/soak/invariants.js';

const A = 'soak-edit:s0-w0\nalpha\n';
const B = 'soak-edit:s0-w1\nbravo\n';

function observation(over: Partial<SoakObservation> = {}): SoakObservation {
  return {
    edits: [],
    stores: [{ storeId: 'st1', current: {}, history: [] }],
    agentWrites: new Map([
      [A, { storeId: 'st1', path: 'a.md' }],
      [B, { storeId: 'st1', path: 'b.md' }],
    ]),
    copies: new Set(),
    toolRuns: new Map(),
    workItems: [],
    unhandledRejections: [],
    leftovers: [],
    unfinished: [],
    ...over,
  };
}

const edit = (path: string, content: string) => ({ storeId: 'st1', path, content, sessionId: 'sesn_1' });

describe('judgeSoak', () => {
  const rows: Array<{ description: string; over: Partial<SoakObservation>; counts: Record<string, number>; violations: RegExp[] }> = [
    {
      description: 'every invariant holds on an empty run',
      over: {},
      counts: { editsChecked: 0, lost: 0 },
      violations: [],
    },
    {
      description: 'an edit the store holds now is saved',
      over: {
        edits: [edit('a.md', A)],
        stores: [{ storeId: 'st1', current: { '/a.md': A }, history: [{ op: 'create', path: '/a.md', content: A }] }],
      },
      counts: { editsChecked: 1, onStore: 1, lost: 0 },
      violations: [],
    },
    {
      description: 'an edit the store held before a Console edit replaced it is saved',
      over: {
        edits: [edit('a.md', A)],
        stores: [
          {
            storeId: 'st1',
            current: { '/a.md': 'console' },
            history: [
              { op: 'create', path: '/a.md', content: A },
              { op: 'update', path: '/a.md', content: 'console' },
            ],
          },
        ],
      },
      counts: { replacedOnStore: 1, lost: 0 },
      violations: [],
    },
    {
      description: 'an edit kept as a copy in the state folder is saved',
      over: { edits: [edit('a.md', A)], copies: new Set([A]) },
      counts: { keptAsCopy: 1, lost: 0 },
      violations: [],
    },
    {
      description: 'an edit neither in the store nor copied is lost',
      over: { edits: [edit('a.md', A)], copies: new Set([B]) },
      counts: { lost: 1 },
      violations: [/edit lost: soak-edit:s0-w0 at \/a\.md of store st1 \(session sesn_1\)/],
    },
    {
      description: 'an edit whose bytes reached the store at another path is lost (and misplaced)',
      over: {
        edits: [edit('a.md', A)],
        stores: [{ storeId: 'st1', current: { '/z.md': A }, history: [{ op: 'create', path: '/z.md', content: A }] }],
      },
      counts: { lost: 1, duplicated: 1 },
      violations: [/edit lost/, /memory misplaced: soak-edit:s0-w0 was written to \/z\.md of store st1, but the agent wrote it to \/a\.md/],
    },
    {
      description: 'the same edit seen at two ends is checked once',
      over: { edits: [edit('a.md', A), edit('a.md', A)], copies: new Set([A]) },
      counts: { editsChecked: 1, keptAsCopy: 1 },
      violations: [],
    },
    {
      description: 'agent content held twice by a store is a duplicate',
      over: {
        agentWrites: new Map([[A, { storeId: 'st1', path: 'a.md' }]]),
        stores: [
          {
            storeId: 'st1',
            current: { '/a.md': A, '/copy/a.md': A },
            history: [
              { op: 'create', path: '/a.md', content: A },
              { op: 'create', path: '/copy/a.md', content: A },
            ],
          },
        ],
      },
      counts: { duplicated: 2 },
      violations: [/memory duplicated: soak-edit:s0-w0 is in store st1 2 times/, /memory misplaced/],
    },
    {
      description: 'a tool call run twice breaks an invariant; once does not',
      over: {
        toolRuns: new Map([
          ['toolu_1', 1],
          ['toolu_2', 2],
        ]),
      },
      counts: { toolCallsRunTwice: 1 },
      violations: [/tool call toolu_2 ran 2 times/],
    },
    {
      description: 'an acknowledged item left active is stranded; an un-acknowledged queued one is not',
      over: {
        workItems: [
          { id: 'work_1', acknowledged: true, state: 'active' },
          { id: 'work_2', acknowledged: false, state: 'queued' },
          { id: 'work_3', acknowledged: true, state: 'stopped' },
        ],
      },
      counts: { stranded: 1 },
      violations: [/work item work_1 was acknowledged and is left active/],
    },
    {
      description: 'unhandled rejections, leftovers and unfinished sessions are each reported',
      over: { unhandledRejections: ['Error: boom'], leftovers: ['/mnt/x'], unfinished: ['sesn_9'] },
      counts: { unhandledRejections: 1, leftBehind: 1, unfinished: 1 },
      violations: [/unhandled: Error: boom/, /left behind: \/mnt\/x/, /session never ended: sesn_9/],
    },
  ];

  for (const row of rows) {
    it(row.description, () => {
      const verdict = judgeSoak(observation(row.over));
      expect(verdict.counts).toMatchObject(row.counts);
      expect(verdict.violations).toHaveLength(row.violations.length);
      row.violations.forEach((re, i) => expect(verdict.violations[i]).toMatch(re));
    });
  }
});
