// Pins the demo's verdict ("exits non-zero if any of those outcomes is wrong"): from a
// right observation every check passes; with any single outcome wrong the verdict fails and names
// exactly the check(s) that outcome breaks. Pure: the observation is built by hand, no emulator.
import { describe, expect, it } from 'vitest';
import { DEMO } from '../../src/demo/scenario.js';
import { emptyReport } from '../../src/memory/rules/sync-report.js';
import { emptyDemoTally, emptyStoreTally, type DemoTally, type StoreTally } from '../../src/demo/tally.js';
import { demoVerdict, type DemoObservation } from '../../src/demo/verdict.js';

const PREFS = 'memstore_prefs';
const HANDBOOK = 'memstore_handbook';
const PREFS_DIR = '/tmp/maw-demo-x/mnt-memory/user-preferences';
const HANDBOOK_DIR = '/tmp/maw-demo-x/mnt-memory/company-handbook';

const report = { ...emptyReport(), durationMs: 3 };

/** What a demo that went right observes (the shape the real run produces). */
function rightObservation(): DemoObservation {
  const tally: DemoTally = emptyDemoTally();
  tally.claims = 1;
  tally.stores.set(PREFS, {
    ...emptyStoreTally(),
    root: PREFS_DIR,
    downloaded: 3,
    uploaded: 2,
    conflicts: 1,
    remoteDeletes: 1,
    syncs: 3,
    finalMs: 4,
    unmounted: true,
  });
  tally.stores.set(HANDBOOK, {
    ...emptyStoreTally(),
    root: HANDBOOK_DIR,
    downloaded: 2,
    refusedEvents: 1,
    syncs: 3,
    finalMs: 2,
    unmounted: true,
  });
  tally.session = { finalMs: 6, flushMs: 1 };
  tally.outcomes = [{ workId: 'work_1', sessionId: 'sess_1', status: 'completed', durationMs: 16_000 }];
  tally.finishes = [
    {
      final: { ...report },
      flush: { ...report },
      cutOff: false,
      pendingUploads: 0,
      unsavedCopies: [],
      uncopied: [],
      durationMs: 7,
      removed: [PREFS_DIR, HANDBOOK_DIR],
      kept: [],
    },
  ];
  return {
    session: {
      status: 'terminated',
      workStopped: true,
      toolResults: [
        { name: 'read', input: { file_path: `${PREFS_DIR}/tone.md` }, isError: false },
        { name: 'write', input: { file_path: `${PREFS_DIR}/notes/meeting.md`, content: DEMO.newNote }, isError: false },
        { name: 'edit', input: { file_path: `${PREFS_DIR}/format/code-style.md` }, isError: false },
        { name: 'write', input: { file_path: `${HANDBOOK_DIR}/policies/expenses.md`, content: 'No approval needed.\n' }, isError: true },
        { name: 'bash', input: { command: `rm '${PREFS_DIR}/scratch.md'` }, isError: false },
      ],
    },
    tally,
    prefs: {
      id: PREFS,
      dir: PREFS_DIR,
      memories: {
        '/tone.md': DEMO.prefs.memories['/tone.md'],
        '/format/code-style.md': DEMO.consoleEdit,
        '/notes/meeting.md': DEMO.newNote,
      },
      folderExists: false,
    },
    handbook: { id: HANDBOOK, dir: HANDBOOK_DIR, memories: { ...DEMO.handbook.memories }, folderExists: false },
  };
}

const prefsTally = (o: DemoObservation): StoreTally => o.tally.stores.get(PREFS)!;
const handbookTally = (o: DemoObservation): StoreTally => o.tally.stores.get(HANDBOOK)!;

const CHECK = {
  ended: 'the session ran to its end and its work item was stopped',
  completed: 'the worker reports the session completed',
  downloaded: 'User Preferences: every memory was downloaded at mount',
  uploaded: "User Preferences: the agent's new note was uploaded",
  conflict: 'User Preferences: the Console edit won the conflict with the agent edit',
  deleted: 'User Preferences: the deleted note is gone from the store',
  untouched: 'User Preferences: untouched memories are unchanged',
  refused: 'Company Handbook: the write into the read-only store was refused',
  handbookUnchanged: 'Company Handbook: the store is unchanged and nothing was uploaded',
  folders: 'both stores were downloaded and their folders removed at the end',
  flush: 'the final sync and flush ran to the end: not cut off, nothing left unsaved',
};

const wrong: Array<{ description: string; spoil: (o: DemoObservation) => void; fails: string[] }> = [
  {
    description: 'the session never ended in the emulator',
    spoil: (o) => void (o.session = { status: 'unfinished', workStopped: false, toolResults: o.session.toolResults }),
    fails: [CHECK.ended],
  },
  {
    description: 'the session ended but its work item was not stopped',
    spoil: (o) => void (o.session.workStopped = false),
    fails: [CHECK.ended],
  },
  {
    description: 'the worker reports the session failed',
    spoil: (o) => void (o.tally.outcomes[0]!.status = 'failed'),
    fails: [CHECK.completed],
  },
  { description: 'the worker reported no session end at all', spoil: (o) => void (o.tally.outcomes = []), fails: [CHECK.completed] },
  {
    description: 'the worker reported two session ends',
    spoil: (o) => void o.tally.outcomes.push({ ...o.tally.outcomes[0]! }),
    fails: [CHECK.completed],
  },
  { description: 'a memory was not downloaded at mount', spoil: (o) => void (prefsTally(o).downloaded = 2), fails: [CHECK.downloaded] },
  {
    description: "the agent's note never reached the store",
    spoil: (o) => void delete o.prefs.memories['/notes/meeting.md'],
    fails: [CHECK.uploaded],
  },
  {
    description: 'the note is in the store but the worker reported no upload',
    spoil: (o) => void (prefsTally(o).uploaded = 0),
    fails: [CHECK.uploaded],
  },
  {
    description: 'the agent edit beat the Console edit (conflict not won by the store)',
    spoil: (o) => void (o.prefs.memories['/format/code-style.md'] = DEMO.agentEdit),
    fails: [CHECK.conflict],
  },
  {
    description: 'the store kept the Console edit but no conflict was reported',
    spoil: (o) => void (prefsTally(o).conflicts = 0),
    fails: [CHECK.conflict],
  },
  {
    description: 'the delete did not reach the store',
    spoil: (o) => void (o.prefs.memories['/scratch.md'] = DEMO.prefs.memories['/scratch.md']),
    fails: [CHECK.deleted],
  },
  {
    description: 'the note is gone but the worker reported no store delete',
    spoil: (o) => void (prefsTally(o).remoteDeletes = 0),
    fails: [CHECK.deleted],
  },
  {
    description: 'an untouched memory changed',
    spoil: (o) => void (o.prefs.memories['/tone.md'] = 'Be verbose.\n'),
    fails: [CHECK.untouched],
  },
  {
    description: 'the write into the read-only store went through (tool call succeeded, store changed, uploaded)',
    spoil: (o) => {
      o.session.toolResults.find((r) => r.name === 'write' && r.isError)!.isError = false;
      handbookTally(o).refusedEvents = 0;
      handbookTally(o).uploaded = 1;
      o.handbook.memories['/policies/expenses.md'] = 'No approval needed.\n';
    },
    fails: [CHECK.refused, CHECK.handbookUnchanged],
  },
  {
    description: 'the read-only write was reported refused but still changed the store',
    spoil: (o) => void (o.handbook.memories['/policies/expenses.md'] = 'No approval needed.\n'),
    fails: [CHECK.handbookUnchanged],
  },
  {
    description: 'something was uploaded into the read-only store',
    spoil: (o) => void (handbookTally(o).uploaded = 1),
    fails: [CHECK.handbookUnchanged],
  },
  {
    description: 'a memory vanished from the read-only store',
    spoil: (o) => void delete o.handbook.memories['/welcome.md'],
    fails: [CHECK.handbookUnchanged],
  },
  {
    description: 'nothing refused the read-only write (no refusal event, no failed tool call)',
    spoil: (o) => {
      o.session.toolResults.find((r) => r.name === 'write' && r.isError)!.isError = false;
      handbookTally(o).refusedEvents = 0;
    },
    fails: [CHECK.refused],
  },
  { description: 'a folder was left behind on disk', spoil: (o) => void (o.prefs.folderExists = true), fails: [CHECK.folders] },
  {
    description: 'the worker kept a folder (unmount removed: false)',
    spoil: (o) => void (handbookTally(o).unmounted = false),
    fails: [CHECK.folders],
  },
  { description: 'a store was never unmounted', spoil: (o) => void (prefsTally(o).unmounted = undefined), fails: [CHECK.folders] },
  { description: 'the handbook was not downloaded', spoil: (o) => void (handbookTally(o).downloaded = 1), fails: [CHECK.folders] },
  {
    description: 'the final flush was cut off at its bound',
    spoil: (o) => {
      o.tally.flushCutOffs = 1;
      o.tally.finishes[0]!.cutOff = true;
    },
    fails: [CHECK.flush],
  },
  {
    description: 'a cut-off event arrived though the finish report says otherwise',
    spoil: (o) => void (o.tally.flushCutOffs = 1),
    fails: [CHECK.flush],
  },
  {
    description: 'the flush ended with local changes not uploaded',
    spoil: (o) => void (o.tally.finishes[0]!.pendingUploads = 1),
    fails: [CHECK.flush],
  },
  {
    description: 'the final sync did not run (no final report)',
    spoil: (o) => void delete o.tally.finishes[0]!.final,
    fails: [CHECK.flush],
  },
  {
    description: 'the session ended without a final sync and flush report',
    spoil: (o) => void (o.tally.finishes = []),
    fails: [CHECK.flush],
  },
];

describe('demoVerdict', () => {
  it('passes every check when every outcome is right', () => {
    const verdict = demoVerdict(rightObservation());
    expect(verdict.expectations.filter((e) => !e.ok)).toEqual([]);
    expect(verdict.expectations.map((e) => e.description)).toEqual(Object.values(CHECK));
    expect(verdict.ok).toBe(true);
  });

  it.each(wrong)('fails when $description, naming that check', ({ spoil, fails }) => {
    const o = rightObservation();
    spoil(o);
    const verdict = demoVerdict(o);
    expect(verdict.ok).toBe(false);
    expect(verdict.expectations.filter((e) => !e.ok).map((e) => e.description)).toEqual(fails);
  });

  it('builds the summary rows from the same observation (a folder left behind shows as not removed)', () => {
    const o = rightObservation();
    o.prefs.folderExists = true;
    const { rows } = demoVerdict(o);
    expect(
      rows.map((r) => [r.name, r.access, r.downloaded, r.uploaded, r.conflictsStoreWon, r.deletes, r.refusedWrites, r.folderRemoved]),
    ).toEqual([
      ['User Preferences', 'read_write', 3, 2, 1, 1, 0, false],
      ['Company Handbook', 'read_only', 2, 0, 0, 0, 1, true],
    ]);
  });
});
