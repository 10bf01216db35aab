import type { EventEmitter } from 'node:events';
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { context } from '@opentelemetry/api';
import { monotonicClock, type TimerClock } from '../internal/clock.js';
import type { Logger } from '../internal/logger.js';
import type { ItemOutcome, WorkerEventMap } from './events.js';
import { acquire } from './item-acquire.js';
import { decideItemEnd, type ItemEnd, type PhasesResult } from './item-end.js';
import { prepare, type ItemHoldings } from './item-prepare.js';
import { ItemReporter } from './item-reporter.js';
import { serve } from './item-serve.js';
import { ItemStep } from './item-step.js';
import { tearDown } from './item-teardown.js';
import type { FinishReport, MemoryPort } from './memory-port.js';
import { MemorySpans } from './memory-spans.js';
import type { WorkerMetrics } from './metrics.js';
import type { ResolvedWorkerOptions } from './options.js';
import type { PathLocks } from './path-locks.js';
import type { ClaimedWork } from './poller.js';
import type { SandboxRuntime } from '../sandbox/runtime.js';
import type { SessionFolderCounts } from './tool-folder.js';
import type { ToolCallRecord } from './tool-guard.js';
import { endWorkSpan, startWorkSpan, withSpan, workTracers } from './tracing.js';

/** Everything one item run needs from its worker. */
export interface ItemRunnerDeps {
  options: ResolvedWorkerOptions;
  logger: Logger;
  emitter: EventEmitter<WorkerEventMap>;
  metrics: WorkerMetrics;
  pathLocks: PathLocks;
  memory: MemoryPort;
  /** Tool outcomes of earlier runs of a session in this worker (a redelivered item answers from it). */
  toolRecord?: ToolCallRecord;
  /**
   * Runs under way per session tool folder in this worker. A session's item can come back while its
   * previous run is still tearing down; only the last run out cleans the folder and its skills.
   */
  sessionFolders?: SessionFolderCounts;
  /** Every time read of the item (duration, time to ready, the lease's deadline). */
  clock?: TimerClock;
  /** What the session's tools run in. Default: the worker process. */
  sandbox?: SandboxRuntime;
  /** Test hook: wraps each session's tools before the replay guard. */
  wrapTools?: (tools: BetaRunnableTool[]) => BetaRunnableTool[];
}

export interface ItemRun {
  work: ClaimedWork;
  /** The environment key for this item, when there is one. */
  environmentKey: string | undefined;
  /** Monotonic ms when the item was claimed (or handed over): the start of `readyMs`. */
  claimedAt: number;
  /** Aborts when the worker closes or the caller gives up. */
  signal: AbortSignal;
}

/**
 * Serve one claimed work item, end to end, and never throw: the outcome says how it ended.
 * Inside the item's work span (so the SDK's request and tool spans are its children), see
 * {@link itemLifecycle}.
 */
export async function runItem(deps: ItemRunnerDeps, run: ItemRun): Promise<ItemOutcome> {
  const tracers = workTracers(deps.options.client);
  const workSpan = startWorkSpan(tracers, run.work, context.active());
  const outcome = await withSpan(workSpan, () => itemLifecycle(deps, run, new MemorySpans(tracers, workSpan)));
  endWorkSpan(workSpan, outcome);
  return outcome;
}

/**
 * The lifecycle of one item: acquire (credential, scoped client, lease) → prepare (session, tool
 * folder, skills, memory) → serve (the session's tool calls) → decide how it ended → tear down
 * (skills and folder, memory finish, path locks, lease, force-stop unless the lease was lost) →
 * report. The tear-down runs whatever happened before it, so an acknowledged item always ends
 * stopped or left to its new owner.
 */
async function itemLifecycle(deps: ItemRunnerDeps, run: ItemRun, spans: MemorySpans): Promise<ItemOutcome> {
  const { work } = run;
  const clock = deps.clock ?? monotonicClock;
  const reporter = new ItemReporter(work, { ...deps, clock });
  const acquired = acquire(work, {
    options: deps.options,
    environmentKey: run.environmentKey,
    signal: run.signal,
    log: reporter.log,
    clock,
  });
  if ('error' in acquired) return reporter.notAcquired(acquired.error);
  const { postClient, control, lease, retryWindow } = acquired;

  const held: ItemHoldings = { cleanupSkills: async () => {}, sessionStarted: false };
  const step = new ItemStep(work.id, `retrieving session ${reporter.sessionId ?? '(none)'}`);
  let phases: PhasesResult = 'ran';
  let error: Error | undefined;
  let end: ItemEnd;
  let flush: FinishReport | undefined;
  try {
    const prepared = await prepare(work, { deps, acquired, reporter, spans, step }, held);
    if (prepared.kind === 'ready') {
      await serve(
        { ...deps, client: postClient, signal: control.signal, retryWindow, reporter, step, clock, claimedAt: run.claimedAt },
        prepared,
        held,
      );
    } else {
      phases = prepared.kind;
    }
  } catch (e) {
    error = step.failure(e);
  } finally {
    // Decided before the tear-down: what happens during it (a lease lost while flushing) does not change it.
    end = decideItemEnd({
      workId: work.id,
      phases,
      error,
      endCause: control.endCause,
      leaseReason: lease.reason,
      leaseRejection: lease.rejection,
    });
    flush = await tearDown(work, { held, memoryEnd: end.memoryEnd, acquired, reporter });
  }
  return reporter.ended({ status: end.status, error: end.error, sessionStarted: held.sessionStarted, flush });
}
