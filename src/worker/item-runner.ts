import { createHash } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import * as fsp from 'node:fs/promises';
import path from 'node:path';
import { context } from '@opentelemetry/api';
import type Anthropic from '@anthropic-ai/sdk';
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { SessionToolRunner } from '@anthropic-ai/sdk/lib/tools/SessionToolRunner';
import { betaAgentToolset20260401, setupSkills, type AgentToolContext } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import { isApiError, statusOf, toRemoteApiError } from '../api/classify.js';
import { ConfigError, coerceError, LeaseLostError, MemoryUnavailableError, MissingInputError, WorkerError } from '../errors.js';
import { combineSignals, linkAbort } from '../internal/abort.js';
import { monotonicClock, type TimerClock } from '../internal/clock.js';
import { errorSummary, type Logger } from '../internal/logger.js';
import type { MemoryEventMap } from '../memory/types.js';
import { decodeWorkSecret } from './credentials.js';
import { safeEmit } from '../internal/safe-emit.js';
import { MEMORY_EVENT_NAMES, type ItemOutcome, type ItemStatus, type WorkerEventMap } from './events.js';
import { Lease, type HeartbeatApi } from './lease.js';
import type { FinishReport, MemoryPort, MountedSessionView, SyncLoopView } from './memory-port.js';
import type { WorkerMetrics } from './metrics.js';
import type { ResolvedWorkerOptions } from './options.js';
import { mountPathsOf, type PathLocks } from './path-locks.js';
import type { ClaimedWork } from './poller.js';
import { scopedClient } from './scoped-client.js';
import { type ToolCallRecord, ToolGuard } from './tool-guard.js';
import { MemorySpans } from './memory-spans.js';
import { endWorkSpan, startWorkSpan, withSpan, workTracers } from './tracing.js';

/** Bound on the final force-stop request (close() must stay bounded). */
const STOP_CUT_OFF_MS = 15_000;
/** Slack on top of finalFlushMs before the worker stops waiting for the memory core's own bound. */
const FINISH_SLACK_MS = 2_000;

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
  sessionFolders?: Map<string, number>;
  clock?: TimerClock;
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

/** Why an item's session ended early; the first recorded wins. */
type EndCause = 'lease' | 'closed';

/**
 * Serve one claimed work item, end to end, and never throw: the outcome says how it ended.
 *
 * Order: resolve the item credential → start the lease heartbeat → fetch the session → skills →
 * (memory) wait for the mount paths, mount, start the sync loop → run the session's tool calls →
 * tear down (skills cleanup, final sync / flush / unmount bounded by `finalFlushMs`, release the
 * paths) → stop the lease → force-stop the item unless the lease was lost. The teardown runs
 * whatever happened before it, so an acknowledged item always ends stopped or left to its new owner.
 */
export async function runItem(deps: ItemRunnerDeps, run: ItemRun): Promise<ItemOutcome> {
  // The work span: current for the whole item, so the SDK's request and tool spans are its children.
  const tracers = workTracers(deps.options.client);
  const workSpan = startWorkSpan(tracers, run.work, context.active());
  const outcome = await withSpan(workSpan, () => serveItem(deps, run, new MemorySpans(tracers, workSpan)));
  endWorkSpan(workSpan, outcome);
  return outcome;
}

async function serveItem(deps: ItemRunnerDeps, run: ItemRun, spans: MemorySpans): Promise<ItemOutcome> {
  const clock = deps.clock ?? monotonicClock;
  const { work } = run;
  const opts = deps.options;
  const startedAt = clock.now();
  const sessionId = work.data.type === 'session' ? work.data.id : undefined;
  const log = deps.logger.child({ work_id: work.id, ...(sessionId ? { session_id: sessionId } : {}) });
  const emit = <K extends keyof WorkerEventMap>(name: K, ...payload: WorkerEventMap[K]): void =>
    safeEmit(deps.emitter, log, name, ...payload);

  const finishOutcome = (status: ItemStatus, error?: Error): ItemOutcome => ({
    workId: work.id,
    sessionId,
    status,
    ...(error ? { error } : {}),
    durationMs: clock.now() - startedAt,
  });

  // 1. Credential: the sessions token from the secret, else the environment key.
  const secret = decodeWorkSecret(work.secret);
  if (secret.status === 'malformed') {
    log.warn('work item secret carries no usable sessions token; falling back to the environment key');
  }
  const credential = secret.sessionsToken ?? run.environmentKey;
  if (credential === undefined) {
    const error = new MissingInputError(
      'environmentKey',
      'ANTHROPIC_ENVIRONMENT_KEY',
      `work item ${work.id} (its secret yields no sessions token)`,
    );
    log.error({ error: errorSummary(error) }, 'no credential for this work item; it cannot be heartbeated or stopped');
    deps.metrics.add('itemsFailed');
    emit('workFailed', { workId: work.id, sessionId, error });
    return finishOutcome('failed', error);
  }
  let client: Anthropic;
  try {
    client = scopedClient(opts.client, credential);
  } catch (e) {
    const error = coerceError(e);
    log.error({ err: error }, 'could not build the client for this work item; it is left to the server to reclaim');
    deps.metrics.add('itemsFailed');
    emit('workFailed', { workId: work.id, sessionId, error });
    return finishOutcome('failed', error);
  }
  const requestOptions = opts.requestOptions ?? {};

  // 2. Lease first: a slow download must never let the lease lapse.
  const itemCtrl = new AbortController();
  let endCause: EndCause | undefined;
  const onOuterAbort = (): void => {
    endCause ??= 'closed';
  };
  run.signal.addEventListener('abort', onOuterAbort, { once: true });
  if (run.signal.aborted) onOuterAbort();
  const detachOuter = linkAbort(run.signal, itemCtrl);
  // The lease TTL each beat reports is the runner's tool-result send retry window (as the official
  // worker sets it): a post is retried only as long as the lease can still be ours. The runner is
  // built after the downloads, so the latest TTL is held until then.
  let leaseTtlMs: number | undefined;
  let runner: SessionToolRunner | undefined;
  const lease = new Lease({
    api: heartbeatApi(client, requestOptions),
    workId: work.id,
    environmentId: work.environmentId,
    logger: log,
    clock,
    onTtl: (ttlMs) => {
      leaseTtlMs = ttlMs;
      if (runner) setSendRetryWindow(runner, ttlMs);
    },
  });
  lease.signal.addEventListener('abort', () => {
    if (lease.reason !== 'done') {
      endCause ??= 'lease';
      itemCtrl.abort(new LeaseLostError(work.id, `work item ${work.id}: lease ended (${lease.reason})`));
    }
  }, { once: true });
  lease.start();

  let status: ItemStatus = 'completed';
  let error: Error | undefined;
  let cleanEnd = false;
  let cleanupSkills: () => Promise<void> = async () => {};
  let toolWorkdir: string | undefined;
  let holdsFolder = false;
  let releasePaths: () => void = () => {};
  let mounted: MountedSessionView | undefined;
  let syncLoop: SyncLoopView | undefined;
  let flush: FinishReport | undefined;
  let sessionStarted = false;
  const detachMemoryEvents: Array<() => void> = [];
  // What the item was doing, so an API failure says which step failed.
  let step = `retrieving session ${sessionId ?? '(none)'}`;

  try {
    if (itemCtrl.signal.aborted) {
      status = 'aborted';
    } else if (work.data.type !== 'session' || sessionId === undefined) {
      log.info({ type: work.data.type }, 'not a session work item; stopping it without running anything');
      status = 'skipped';
    } else {
      // 3. The session: one fetch shared by skills and memory.
      const session: BetaManagedAgentsSession = await client.beta.sessions.retrieve(sessionId, {}, {
        ...requestOptions,
        signal: itemCtrl.signal,
      });
      if (session.status === 'terminated') {
        log.info('session already terminated; stopping its work item without running anything');
        status = 'skipped';
      } else {
        const storeResources = session.resources.filter((r) => r.type === 'memory_store');
        const memoryOn = opts.memorySyncIntervalMs !== null;
        // 4. stores + memory on + no token → fail with the fix.
        if (storeResources.length > 0 && memoryOn && secret.sessionsToken === null) {
          throw new MemoryUnavailableError(work.id, sessionId);
        }
        // With several sessions at once, each gets a folder of its own: they must not share files, nor
        // the `<workdir>/skills/<name>` folders setupSkills writes and its cleanup removes.
        if (opts.concurrency > 1) {
          toolWorkdir = sessionWorkdir(opts.workdir, sessionId);
          deps.sessionFolders?.set(toolWorkdir, (deps.sessionFolders.get(toolWorkdir) ?? 0) + 1);
          holdsFolder = true;
          await fsp.mkdir(toolWorkdir, { recursive: true, mode: 0o700 }).catch((e: unknown) => {
            throw new ConfigError(
              `work item ${work.id}: cannot create the tool folder ${toolWorkdir} of session ${sessionId} ` +
                `(${(e as NodeJS.ErrnoException).code ?? coerceError(e).message}); with concurrency > 1 every session works in ` +
                '`<workdir>/sessions/<session id>`, so `workdir` must be a directory the worker can write to.',
              [],
              { cause: e },
            );
          });
        }
        const ctx: AgentToolContext = {
          workdir: toolWorkdir ?? opts.workdir,
          client,
          session,
          ...(opts.maxFileBytes !== undefined ? { maxFileBytes: opts.maxFileBytes } : {}),
        };
        // 7. Skills, as the official worker: failures are only logged.
        try {
          cleanupSkills = await setupSkills(ctx);
        } catch (e) {
          log.warn({ error: errorSummary(coerceError(e)) }, 'skill setup failed; the session runs without them');
        }
        // 5. Memory: exclusive paths, mount, sync loop.
        if (storeResources.length > 0 && memoryOn) {
          step = 'waiting for its mount paths';
          const lockKeys = mountPathsOf(storeResources, opts.workdir);
          releasePaths = await deps.pathLocks.acquire(lockKeys, { sessionId, workId: work.id }, {
            waitMs: opts.pathWaitMs,
            signal: itemCtrl.signal,
          });
          const mounter = deps.memory.mounter({
            client,
            logger: log,
            workdir: opts.workdir,
            stateDir: opts.stateDir,
            allowedMountRoots: opts.allowedMountRoots,
            mountTimeoutMs: opts.mountTimeoutMs,
            deletions: opts.memorySyncDeletions,
            deleteAfterMs: opts.memoryDeleteAfterMs,
          });
          detachMemoryEvents.push(forwardMemoryEvents(mounter, deps, emit, work.id, sessionId), spans.observe(mounter));
          step = `mounting the memory stores of session ${sessionId}`;
          mounted = await spans.mount(storeResources.length, (wrapStore) => mounter.mount(session, { signal: itemCtrl.signal, workId: work.id, wrapStore }));
          ctx.allowedRoots = [...mounted.roots];
          ctx.readOnlyRoots = [...mounted.readOnlyRoots];
          syncLoop = deps.memory.syncLoop({
            client,
            mounted,
            intervalMs: opts.memorySyncIntervalMs as number,
            deletions: opts.memorySyncDeletions,
            finalFlushMs: opts.finalFlushMs,
            deleteAfterMs: opts.memoryDeleteAfterMs,
            logger: log,
            stateDir: opts.stateDir,
            wrapSync: (phase, sync) => spans.sync(phase, sync),
          });
          detachMemoryEvents.push(forwardMemoryEvents(syncLoop, deps, emit, work.id, sessionId), spans.observe(syncLoop));
        } else if (storeResources.length > 0) {
          log.debug('memory turned off (memorySyncIntervalMs: null); the session runs without its stores');
        }
        itemCtrl.signal.throwIfAborted();

        const tools: BetaRunnableTool[] =
          typeof opts.tools === 'function' ? opts.tools(ctx) : (opts.tools ?? betaAgentToolset20260401(ctx));
        const guard = new ToolGuard({ hooks: syncLoop, logger: log, ...(deps.toolRecord ? { outcomes: deps.toolRecord.forSession(sessionId) } : {}) });
        runner = new SessionToolRunner(sessionId, {
          client,
          tools: guard.wrapAll(tools),
          ...(opts.maxIdleMs !== undefined ? { maxIdleMs: opts.maxIdleMs } : {}),
          ...(opts.requestOptions !== undefined ? { requestOptions: opts.requestOptions } : {}),
          signal: itemCtrl.signal,
        });
        if (leaseTtlMs !== undefined) setSendRetryWindow(runner, leaseTtlMs);
        sessionStarted = true;
        step = `running the tool calls of session ${sessionId}`;
        const readyMs = clock.now() - run.claimedAt;
        log.info({ stores: mounted?.stores.length ?? 0, ready_ms: readyMs }, 'session started');
        emit('sessionStarted', { workId: work.id, sessionId, stores: mounted?.stores.length ?? 0, readyMs });
        for await (const call of runner) {
          log.debug({ tool: call.name, tool_use_id: call.toolUseId, is_error: call.isError, posted: call.posted }, 'tool call done');
        }
        if (guard.replays > 0) log.info({ replays: guard.replays }, 'replayed tool calls answered from the record');
      }
    }
  } catch (e) {
    // API failures become RemoteApiErrors naming the step (status, request id and retryable kept).
    error = isApiError(e) && !(e instanceof WorkerError) ? toRemoteApiError(e, `work item ${work.id}: ${step}`) : coerceError(e);
  } finally {
    run.signal.removeEventListener('abort', onOuterAbort);
  }

  // How did it end? An abort caused by the lease or by close() is not a failure of the item.
  if (endCause === 'lease') {
    status = lease.lost ? 'lease_lost' : lease.reason === 'server_stop' ? 'stopped_by_server' : 'failed';
    // A rejected heartbeat is the reason, whatever the abort it caused made the session throw.
    error = status === 'failed' ? toRemoteApiError(lease.rejection, `heartbeat of work item ${work.id}`) : undefined;
  } else if (endCause === 'closed') {
    if (status !== 'skipped') status = 'aborted';
    error = undefined;
  } else if (error) {
    status = 'failed';
  }
  // Memory end: a session the runner or the operator ended gets its final sync; a lost lease or a
  // failure gets the push-only flush.
  cleanEnd = error === undefined && (endCause === undefined || endCause === 'closed' || lease.reason === 'server_stop');

  // 6. Teardown, always. The lease keeps heartbeating until it is done.
  // Another run of this session still works in the folder: leave it and its skills to that run.
  const folderShared = holdsFolder && toolWorkdir !== undefined && releaseFolder(deps.sessionFolders, toolWorkdir) > 0;
  try {
    if (!folderShared) await cleanupSkills();
  } catch (e) {
    log.warn({ error: errorSummary(coerceError(e)) }, 'skill cleanup failed');
  }
  if (toolWorkdir !== undefined && !folderShared) {
    // The skills cleanup removes `skills/<name>` but leaves `skills/` itself: without this, every
    // session with a skill left `<workdir>/sessions/<id>/skills/` behind, and its folder never went.
    await removeIfEmpty(path.join(toolWorkdir, 'skills'), log);
    await removeIfEmpty(toolWorkdir, log);
  }
  if (syncLoop) {
    const loop = syncLoop;
    flush = await spans.finish(cleanEnd, () => boundedFinish(loop, cleanEnd, opts.finalFlushMs, log));
  } else if (mounted) {
    await mounted.unmount().catch((e: unknown) => log.warn({ error: errorSummary(coerceError(e)) }, 'unmount failed'));
  }
  for (const detach of detachMemoryEvents) detach();
  releasePaths();
  detachOuter();
  await lease.release();

  if (lease.lost) {
    deps.metrics.add('leaseLosses');
    log.warn({ reason: lease.reason }, 'lease lost; the work item is left to its new owner, not stopped');
    emit('leaseLost', { workId: work.id, sessionId, reason: lease.reason as 'lease_lost' | 'assumed_lost' });
  } else if (await forceStop(client, work, requestOptions, log)) {
    emit('workStopped', { workId: work.id });
  }

  const outcome = finishOutcome(status, error);
  if (status === 'failed') {
    deps.metrics.add('itemsFailed');
    log.error({ error: errorSummary(error) }, 'work item failed');
    log.debug({ err: error }, 'work item failure, with its stack');
    emit('workFailed', { workId: work.id, sessionId, error: error ?? new Error('work item failed') });
  } else if (status === 'completed' || status === 'skipped' || status === 'stopped_by_server') {
    deps.metrics.add('itemsCompleted');
  }
  log.info({ status, duration_ms: outcome.durationMs }, 'work item done');
  if (sessionStarted && sessionId !== undefined) {
    emit('sessionEnded', { workId: work.id, sessionId, outcome, ...(flush ? { flush } : {}) });
  }
  return outcome;
}

/**
 * The tool workdir of one session when the worker serves several at once:
 * `<workdir>/sessions/<session id>` (a hash of the id if it is not a plain id).
 */
export function sessionWorkdir(workdir: string, sessionId: string): string {
  const name = /^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$/.test(sessionId)
    ? sessionId
    : `session-${createHash('sha256').update(sessionId).digest('hex').slice(0, 32)}`;
  return path.join(path.resolve(workdir), 'sessions', name);
}

/** Count one run out of a session folder; returns how many runs still use it. */
function releaseFolder(folders: Map<string, number> | undefined, dir: string): number {
  if (!folders) return 0;
  const left = (folders.get(dir) ?? 1) - 1;
  if (left > 0) folders.set(dir, left);
  else folders.delete(dir);
  return left;
}

/** Remove a session's tool folder if the session left it empty; files in it are kept for a later turn. */
async function removeIfEmpty(dir: string, log: Logger): Promise<void> {
  try {
    await fsp.rmdir(dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST' && code !== 'ENOENT') {
      log.debug({ err: coerceError(e), dir }, 'could not remove the empty session folder');
    }
  }
}

/** Set the runner's tool-result send retry window (an SDK-internal method the official worker calls too). */
function setSendRetryWindow(runner: SessionToolRunner, ms: number): void {
  const r = runner as unknown as { _setSendRetryWindow?: (ms: number) => void };
  if (typeof r._setSendRetryWindow === 'function') r._setSendRetryWindow(ms);
}

/** The heartbeat call over a scoped client, with the caller's request options merged in. */
function heartbeatApi(client: Anthropic, requestOptions: object): HeartbeatApi {
  return {
    heartbeat: (workId, params, options) =>
      client.beta.environments.work.heartbeat(workId, params, { ...requestOptions, signal: options.signal }),
  };
}

/**
 * Run the memory core's finish (it bounds itself by finalFlushMs and unmounts); if it has not
 * returned shortly after that bound, stop waiting so close() stays bounded.
 */
async function boundedFinish(syncLoop: SyncLoopView, clean: boolean, finalFlushMs: number, log: Logger): Promise<FinishReport | undefined> {
  const guard = combineSignals([], finalFlushMs + FINISH_SLACK_MS);
  try {
    return await Promise.race([
      syncLoop.finish({ clean, signal: guard.signal }),
      new Promise<undefined>((resolve) => guard.signal.addEventListener('abort', () => resolve(undefined), { once: true })),
    ]).then((report) => {
      if (report === undefined) log.error({ bound_ms: finalFlushMs }, 'memory finish overran its bound; the worker moved on');
      return report;
    });
  } catch (e) {
    log.error({ err: coerceError(e) }, 'memory finish failed');
    return undefined;
  } finally {
    guard.dispose();
  }
}

/** Force-stop the item with the item credential; 409 means it already is. True when stopped. */
async function forceStop(client: Anthropic, work: ClaimedWork, requestOptions: object, log: Logger): Promise<boolean> {
  const cut = combineSignals([], STOP_CUT_OFF_MS);
  try {
    await client.beta.environments.work.stop(
      work.id,
      { environment_id: work.environmentId, force: true },
      { ...requestOptions, signal: cut.signal },
    );
    return true;
  } catch (e) {
    if (statusOf(e) === 409) return true;
    log.error({ error: errorSummary(e) }, 'force-stop failed; the server will reclaim the item when its lease expires');
    return false;
  } finally {
    cut.dispose();
  }
}

/** Re-emit a memory emitter's events with the item's ids, and count them. Returns the detacher. */
function forwardMemoryEvents(
  source: EventEmitter<MemoryEventMap>,
  deps: ItemRunnerDeps,
  emit: <K extends keyof WorkerEventMap>(name: K, ...payload: WorkerEventMap[K]) => void,
  workId: string,
  sessionId: string,
): () => void {
  const handlers: Array<[string, (p: object) => void]> = [];
  for (const name of MEMORY_EVENT_NAMES) {
    const handler = (payload: object): void => {
      countMemoryEvent(deps.metrics, name, payload);
      (emit as (n: string, p: object) => void)(name, { ...payload, workId, sessionId });
    };
    handlers.push([name, handler]);
    (source.on as (n: string, h: (p: object) => void) => void)(name, handler);
  }
  return () => {
    for (const [name, handler] of handlers) (source.off as (n: string, h: (p: object) => void) => void)(name, handler);
  };
}

function countMemoryEvent(metrics: WorkerMetrics, name: (typeof MEMORY_EVENT_NAMES)[number], payload: object): void {
  switch (name) {
    case 'uploaded':
      metrics.add('uploads');
      break;
    case 'downloaded':
      metrics.add('downloads');
      break;
    case 'conflict':
      metrics.add('conflicts');
      break;
    case 'deleted':
      metrics.add('deletes');
      break;
    case 'flushCutOff':
      metrics.add('flushCutOffs');
      break;
    case 'synced': {
      const p = payload as MemoryEventMap['synced'][0];
      // One count per pass over the session's stores, not per store.
      if (p.storeId === undefined) {
        metrics.add('syncs');
        metrics.add('syncDurationMsTotal', p.report.durationMs);
      }
      break;
    }
    default:
      break;
  }
}
