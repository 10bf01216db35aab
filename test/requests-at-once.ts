import type { RequestRecord } from '../src/testing/index.js';

/**
 * The most requests of `records` (the emulator's request log) open at one moment, from each one's
 * start and answer time. An answer at the same millisecond as a start counts as before it.
 */
export function mostAtOnce(records: readonly RequestRecord[]): number {
  const edges = records.flatMap((r) => [
    { at: r.startedAt, d: 1 },
    { at: r.startedAt + r.ms, d: -1 },
  ]);
  edges.sort((a, b) => a.at - b.at || a.d - b.d);
  let open = 0;
  let most = 0;
  for (const e of edges) most = Math.max(most, (open += e.d));
  return most;
}
