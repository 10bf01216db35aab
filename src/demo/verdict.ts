/**
 * The demo's verdict, pure: from what the demo observed (how the emulator saw the session end, the
 * worker's events, each store's final contents and whether its folder is still on disk) to one
 * summary row per store and every expected outcome, checked. No I/O here, so each wrong outcome
 * can be table-tested on its own.
 */
import { DEMO } from './scenario.js';
import { expectation, summaryRow, type Expectation, type StoreSummaryRow } from './summary.js';
import { emptyStoreTally, type DemoTally } from './tally.js';

export interface DemoToolResult {
  name: string;
  input: unknown;
  isError: boolean;
}

export interface DemoStoreObservation {
  id: string;
  /** The store's mount folder. */
  dir: string;
  /** The store's final contents (path → content). */
  memories: Record<string, string>;
  /** Whether the mount folder is still on disk after the worker closed. */
  folderExists: boolean;
}

export interface DemoObservation {
  /** How the emulator saw the session end; `status: 'unfinished'` when it never did. */
  session: { status: string; workStopped: boolean; toolResults: readonly DemoToolResult[] };
  /** What the worker's events said. */
  tally: DemoTally;
  prefs: DemoStoreObservation;
  handbook: DemoStoreObservation;
}

export interface DemoVerdict {
  ok: boolean;
  rows: StoreSummaryRow[];
  expectations: Expectation[];
}

export function demoVerdict(o: DemoObservation): DemoVerdict {
  const { tally } = o;
  const refusedIn = (dir: string): number =>
    o.session.toolResults.filter(
      (r) =>
        r.isError &&
        ['write', 'edit'].includes(r.name) &&
        String((r.input as { file_path?: unknown } | undefined)?.file_path ?? '').startsWith(dir + '/'),
    ).length;
  const rowFor = (s: DemoStoreObservation, name: string, access: 'read_write' | 'read_only'): StoreSummaryRow =>
    summaryRow(name, access, tally.stores.get(s.id) ?? emptyStoreTally(), {
      refusedToolCalls: refusedIn(s.dir),
      folderExists: s.folderExists,
      session: tally.session,
    });
  const p = rowFor(o.prefs, DEMO.prefs.name, 'read_write');
  const h = rowFor(o.handbook, DEMO.handbook.name, 'read_only');
  const rows = [p, h];
  const prefsFinal = o.prefs.memories;
  const handbookFinal = o.handbook.memories;
  const finishes = tally.finishes;

  const expectations: Expectation[] = [
    expectation('the session ran to its end and its work item was stopped', o.session.status === 'terminated' && o.session.workStopped, {
      status: o.session.status,
      workStopped: o.session.workStopped,
    }),
    expectation(
      'the worker reports the session completed',
      tally.outcomes.length === 1 && tally.outcomes[0]?.status === 'completed',
      tally.outcomes.map((x) => x.status),
    ),
    expectation(
      'User Preferences: every memory was downloaded at mount',
      p.downloaded >= Object.keys(DEMO.prefs.memories).length,
      p.downloaded,
    ),
    expectation(
      "User Preferences: the agent's new note was uploaded",
      prefsFinal['/notes/meeting.md'] === DEMO.newNote && p.uploaded >= 1,
      { content: prefsFinal['/notes/meeting.md'], uploaded: p.uploaded },
    ),
    expectation(
      'User Preferences: the Console edit won the conflict with the agent edit',
      prefsFinal['/format/code-style.md'] === DEMO.consoleEdit && p.conflictsStoreWon >= 1,
      { content: prefsFinal['/format/code-style.md'], conflicts: p.conflictsStoreWon },
    ),
    expectation('User Preferences: the deleted note is gone from the store', !('/scratch.md' in prefsFinal) && p.deletes >= 1, {
      paths: Object.keys(prefsFinal),
      deletes: p.deletes,
    }),
    expectation(
      'User Preferences: untouched memories are unchanged',
      prefsFinal['/tone.md'] === DEMO.prefs.memories['/tone.md'],
      prefsFinal['/tone.md'],
    ),
    expectation('Company Handbook: the write into the read-only store was refused', h.refusedWrites >= 1, h.refusedWrites),
    expectation(
      'Company Handbook: the store is unchanged and nothing was uploaded',
      sameMemories(handbookFinal, DEMO.handbook.memories) && h.uploaded === 0,
      { memories: handbookFinal, uploaded: h.uploaded },
    ),
    expectation(
      'both stores were downloaded and their folders removed at the end',
      rows.every((r) => r.folderRemoved) && h.downloaded >= Object.keys(DEMO.handbook.memories).length,
      rows.map((r) => ({ store: r.name, removed: r.folderRemoved })),
    ),
    expectation(
      'the final sync and flush ran to the end: not cut off, nothing left unsaved',
      tally.flushCutOffs === 0 &&
        finishes.length === 1 &&
        finishes.every((f) => f.final !== undefined && !f.cutOff && f.pendingUploads === 0),
      {
        cutOffs: tally.flushCutOffs,
        finishes: finishes.map((f) => ({ final: f.final !== undefined, cutOff: f.cutOff, pendingUploads: f.pendingUploads })),
      },
    ),
  ];
  return { ok: expectations.every((e) => e.ok), rows, expectations };
}

function sameMemories(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a).sort();
  const kb = Object.keys(b).sort();
  return ka.length === kb.length && ka.every((k, i) => k === kb[i] && a[k] === b[k]);
}
