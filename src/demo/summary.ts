/**
 * The demo's verdict, pure: one summary row per store from the worker's event tally, the store's
 * final contents and the folder's existence; then every expected outcome checked against them.
 */
import type { StoreTally } from './tally.js';

export interface StoreSummaryRow {
  name: string;
  access: 'read_write' | 'read_only';
  downloaded: number;
  uploaded: number;
  conflictsStoreWon: number;
  deletes: number;
  refusedWrites: number;
  finalFlushMs: number | undefined;
  folderRemoved: boolean;
}

export function summaryRow(
  name: string,
  access: 'read_write' | 'read_only',
  tally: StoreTally,
  extra: { refusedToolCalls: number; folderExists: boolean; session: { finalMs: number | undefined; flushMs: number | undefined } },
): StoreSummaryRow {
  return {
    name,
    access,
    downloaded: tally.downloaded,
    uploaded: tally.uploaded,
    conflictsStoreWon: tally.conflicts,
    deletes: tally.remoteDeletes,
    refusedWrites: Math.max(tally.refusedEvents, extra.refusedToolCalls),
    finalFlushMs: sumDefined(tally.finalMs ?? extra.session.finalMs, tally.flushMs ?? extra.session.flushMs),
    folderRemoved: tally.unmounted === true && !extra.folderExists,
  };
}

const COLUMNS: Array<[string, (r: StoreSummaryRow) => string]> = [
  ['store', (r) => r.name],
  ['access', (r) => r.access],
  ['downloaded', (r) => String(r.downloaded)],
  ['uploaded', (r) => String(r.uploaded)],
  ['conflicts (store won)', (r) => String(r.conflictsStoreWon)],
  ['deletes', (r) => String(r.deletes)],
  ['refused writes', (r) => String(r.refusedWrites)],
  ['final flush', (r) => (r.finalFlushMs === undefined ? '-' : `${Math.round(r.finalFlushMs)} ms`)],
  ['folder removed', (r) => (r.folderRemoved ? 'yes' : 'NO')],
];

export function formatSummaryTable(rows: readonly StoreSummaryRow[]): string {
  const widths = COLUMNS.map(([title, cell]) => Math.max(title.length, ...rows.map((r) => cell(r).length)));
  const fmt = (cells: string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  const lines = [fmt(COLUMNS.map(([t]) => t)), fmt(widths.map((w) => '-'.repeat(w)))];
  for (const r of rows) lines.push(fmt(COLUMNS.map(([, cell]) => cell(r))));
  return lines.join('\n') + '\n';
}

export interface Expectation {
  description: string;
  ok: boolean;
  /** What was seen, printed when the expectation fails. */
  actual: string;
}

export function expectation(description: string, ok: boolean, actual: unknown): Expectation {
  return { description, ok, actual: typeof actual === 'string' ? actual : JSON.stringify(actual) };
}

export function formatExpectations(list: readonly Expectation[]): string {
  return list.map((e) => `  ${e.ok ? 'ok  ' : 'FAIL'}  ${e.description}${e.ok ? '' : ` (saw ${e.actual})`}`).join('\n') + '\n';
}

function sumDefined(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined && b === undefined ? undefined : (a ?? 0) + (b ?? 0);
}
