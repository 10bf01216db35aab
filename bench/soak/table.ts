/** The soak's one table of counts: what was injected, what the worker did, and each invariant. */
import type { SoakVerdict } from './invariants.js';
import type { SoakStats } from './run-soak.js';

export function formatSoakTable(stats: SoakStats, verdict: SoakVerdict): string {
  const pct = (n: number, of: number): string => (of === 0 ? '-' : `${((100 * n) / of).toFixed(1)} %`);
  const c = verdict.counts;
  const rows: Array<[string, string, string]> = [
    [
      'injected',
      'memory requests failed 5xx/429',
      `${stats.memoryFailed} of ${stats.memoryRequests} (${pct(stats.memoryFailed, stats.memoryRequests)})`,
    ],
    [
      'injected',
      'work requests failed 5xx/429',
      `${stats.workFailed} of ${stats.workRequests} (${pct(stats.workFailed, stats.workRequests)})`,
    ],
    [
      'injected',
      'lost responses',
      `${stats.lostResponses} (${pct(stats.lostResponses, stats.memoryRequests + stats.workRequests)} of memory+work)`,
    ],
    ['injected', 'event streams cut', String(stats.streamDrops)],
    ['injected', 'leases lost (heartbeat 412)', String(stats.leaseLossesInjected)],
    ['injected', 'requests hung', String(stats.hangs)],
    ['worker', 'sessions ended by their agent', String(stats.sessionsEndedByAgent)],
    ['worker', 'sessions archived after a failed item', String(stats.sessionsEndedByFailure)],
    ['worker', 'work items claimed / failed', `${stats.itemsClaimed} / ${stats.itemsFailed}`],
    ['worker', 'leases seen lost by the worker', String(stats.leaseLosses)],
    ['worker', 'tool calls answered (posted twice)', `${stats.toolCalls} (${stats.resultsPostedTwice})`],
    ['worker', 'uploads / deletes / conflicts', `${stats.uploads} / ${stats.deletes} / ${stats.conflicts}`],
    ['worker', 'final flushes cut off', String(stats.flushCutOffs)],
    ['worker', 'files kept in the state folder', String(stats.copies)],
    ['check', 'edits on disk at an end, checked', String(c.editsChecked)],
    ['check', '  in the store', String(c.onStore)],
    ['check', '  reached the store, then replaced', String(c.replacedOnStore)],
    ['check', '  kept as a copy', String(c.keptAsCopy)],
    [
      'check',
      'agent deletes still in the store at the end',
      `${stats.agentDeletesNotApplied} of ${stats.agentDeletes} (${stats.agentDeletesNotAppliedRedelivered} in sessions delivered again)`,
    ],
    ['invariant', 'edits lost', String(c.lost)],
    ['invariant', 'memories duplicated or misplaced', String(c.duplicated)],
    ['invariant', 'tool calls run twice', String(c.toolCallsRunTwice)],
    ['invariant', 'acknowledged items not stopped', String(c.stranded)],
    ['invariant', 'unhandled rejections and errors', String(c.unhandledRejections)],
    ['invariant', 'folders left behind', String(c.leftBehind)],
    ['invariant', 'sessions that never ended', String(c.unfinished)],
  ];
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i]!.length), ['kind', 'count', 'value'][i]!.length));
  const line = (r: readonly string[]): string =>
    r
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(['kind', 'what', 'count']), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}
