/**
 * What a sync loop does when its session goes idle (the agent's turn ended): the files changed
 * since the last sync go up at once, in a push-only pass (uploads only: no pull, no delete on
 * either side) bounded by the flush bound, instead of waiting for the sync interval. The interval
 * still bounds every other sync: the push neither counts as one nor moves the next one. Pure: it
 * sees only what the scheduler knows at that moment.
 */

/** What the scheduler knows when the session goes idle. */
export interface IdleFacts {
  /** No routine sync may start: the session is finishing (its own last passes upload) or its mount is gone. */
  closed: boolean;
  /** Tool calls started and not yet done. */
  toolCallsInFlight: number;
  /** A sync or a push runs now. */
  syncRunning: boolean;
  /** A push already waits for the running sync to end. */
  pushQueued: boolean;
}

/**
 * - `push-now`: start the push;
 * - `push-after-running`: push once the running sync (or push) ends: it may have scanned the
 *   folder before the turn's last edit;
 * - `none`: nothing to do now.
 */
export type IdlePushDecision = 'push-now' | 'push-after-running' | 'none';

/**
 * Rules, in order:
 * - closed: none (the finish uploads whatever changed);
 * - a tool call still runs: none; the session is not idle for this worker yet (a call of another
 *   thread runs), and the sync after that call covers its edits;
 * - a push already waits: none, it scans the folder when it starts, so it covers this idle too;
 * - a sync runs: push after it;
 * - otherwise: push now.
 */
export function idlePushDecision(facts: IdleFacts): IdlePushDecision {
  if (facts.closed) return 'none';
  if (facts.toolCallsInFlight > 0) return 'none';
  if (facts.pushQueued) return 'none';
  if (facts.syncRunning) return 'push-after-running';
  return 'push-now';
}
