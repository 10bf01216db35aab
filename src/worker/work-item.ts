/**
 * One claimed work item, from its claim to its outcome, read top-down: acquire (credential, scoped
 * client, lease) → claim (the first heartbeat; nothing else runs before it) → prepare (session,
 * tool folder, skills, memory) → serve (the session's tool calls) → decide how it ended → tear down
 * (tool folder, memory, lease, force-stop unless the lease was lost or never ours) → report. The
 * tear-down runs whatever happened before it, so an acknowledged item always ends stopped or left
 * to its new owner. How it ends is decided by the pure rules of `item-end.ts`; docs/design.md ("How
 * a work item runs and ends") says why.
 */
import type { EventEmitter } from 'node:events';
import type Anthropic from '@anthropic-ai/sdk';
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { SessionToolRunner, type SessionToolRunnerOptions } from '@anthropic-ai/sdk/lib/tools/SessionToolRunner';
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';
import { betaAgentToolset20260401, type AgentToolContext } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import { context } from '@opentelemetry/api';
import { isApiError, statusOf, toRemoteApiError } from '../api/classify.js';
import { coerceError, MemoryUnavailableError, MissingInputError, WorkerError } from '../errors.js';
import { linkAbort, onAbort } from '../internal/abort.js';
import { monotonicClock, type TimerClock } from '../internal/clock.js';
import { errorSummary, type Logger } from '../internal/logger.js';
import { safeEmit } from '../internal/safe-emit.js';
import { defaultStateDir } from '../memory/index.js';
import { sessionSandboxOf, type SandboxRuntime } from '../sandbox/runtime.js';
import type { SandboxLimitHit } from '../sandbox/limits/limits.js';
import { SessionSandbox } from '../sandbox/session-sandbox.js';
import { decodeWorkSecret } from './credentials.js';
import type { ItemOutcome, ItemStatus, WorkerEmit, WorkerEventMap } from './events.js';
import { ItemControl } from './item-control.js';
import { decideItemEnd, type PhasesResult } from './item-end.js';
import { ItemMemory, storeResources } from './item-memory.js';
import { Lease } from './lease.js';
import type { FinishReport, MemoryPort, SyncLoopView } from './memory-port.js';
import { mcpServerHosts } from './mcp-hosts.js';
import { MemorySpans } from './memory-spans.js';
import type { WorkerMetrics } from './metrics.js';
import type { ResolvedWorkerOptions } from './options.js';
import type { PathLocks } from './path-locks.js';
import type { ClaimedWork } from './poller.js';
import { RunnerHooks } from './runner-hooks.js';
import { scopedClient } from './scoped-client.js';
import { endsTurn, tappingSessionEvents } from './session-events-tap.js';
import { stopServedWork } from './stop-work.js';
import { placementFor, type StorePlacementMode } from './store-placement.js';
import { ToolFolder, type SessionFolderCounts } from './tool-folder.js';
import { type ToolCallRecord, ToolGuard } from './tool-guard.js';
import { endWorkSpan, startWorkSpan, withSpan, workTracers } from './tracing.js';

/** Everything one item needs from its worker. */
export interface WorkItemDeps {
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
  /** Test hook: how long a runner started before the mount holds its calls. Default {@link EARLY_RUNNER_WAIT_MS}. */
  earlyRunnerWaitMs?: number;
}

export interface WorkItemRun {
  work: ClaimedWork;
  /** The environment key for this item, when there is one. */
  environmentKey: string | undefined;
  /** Monotonic ms when the item was claimed (or handed over): the start of `readyMs`. */
  claimedAt: number;
  /** Aborts when the worker closes or the caller gives up. */
  signal: AbortSignal;
}

/**
 * Serve one claimed work item, end to end, and never throw: the outcome says how it ended. Runs
 * inside the item's work span, so the SDK's request and tool spans are its children.
 */
export async function runWorkItem(deps: WorkItemDeps, run: WorkItemRun): Promise<ItemOutcome> {
  const tracers = workTracers(deps.options.client);
  const workSpan = startWorkSpan(tracers, run.work, context.active());
  const outcome = await withSpan(workSpan, () => workItem(deps, run, new MemorySpans(tracers, workSpan)));
  endWorkSpan(workSpan, outcome);
  return outcome;
}

async function workItem(deps: WorkItemDeps, run: WorkItemRun, spans: MemorySpans): Promise<ItemOutcome> {
  const { work } = run;
  const opts = deps.options;
  const clock = deps.clock ?? monotonicClock;
  const report = new ItemReport(work, deps.logger, deps.emitter, deps.metrics, clock);
  const { log } = report;

  const item = acquire(work, opts, run.environmentKey, run.signal, log, clock);
  if ('error' in item) return report.notAcquired(item.error);

  // What the item holds once prepared; the tear-down gives back whatever was taken.
  let folder: ToolFolder | undefined;
  let memory: ItemMemory | undefined;
  let phases: PhasesResult = 'ran';
  let error: Error | undefined;
  let sessionGone = false;
  const step = new ItemStep(work.id, 'claiming it with its first heartbeat');
  try {
    // The first heartbeat claims the item: no read, download or tool runs before the server says it is ours.
    const session = (await claimed(item))
      ? (step.enter(`retrieving session ${report.sessionId ?? '(none)'}`), await sessionToServe(work, item, log))
      : 'aborted';
    if (typeof session === 'string') {
      phases = session;
    } else {
      const stores = storeResources(session);
      const intervalMs = opts.memorySyncIntervalMs;
      const memoryOn = stores.length > 0 && intervalMs !== null;
      if (memoryOn && item.sessionsToken === null) throw new MemoryUnavailableError(work.id, session.id);
      folder = opts.concurrency > 1 ? ToolFolder.enter(deps.sessionFolders, opts.workdir, session.id) : ToolFolder.shared(opts.workdir);
      if (memoryOn) memory = itemMemory(deps, item, report, spans, session, intervalMs, storePlacement(deps, stores, folder.path));
      else if (stores.length > 0) warnMemoryOff(log, session.id, stores);
      const toolContext = await prepare(work.id, session, folder, item, opts, log);
      const served = await serve({
        deps,
        item,
        report,
        step,
        sessionId: session.id,
        toolContext,
        memory,
        readyMs: () => clock.now() - run.claimedAt,
        mcpHosts: mcpServerHosts(session),
      });
      sessionGone = served === 'gone';
    }
  } catch (e) {
    error = step.failure(e);
  }

  // Decided before the tear-down: what happens during it (a lease lost while flushing) does not change it.
  const end = decideItemEnd({
    workId: work.id,
    phases,
    error,
    endCause: item.control.endCause,
    leaseReason: item.lease.reason,
    leaseRejection: item.lease.rejection,
  });
  const flush = await tearDown(work, item, report, folder, memory, end.memoryEnd === 'final_sync');
  return report.ended(end.status, end.error, flush, sessionGone && end.status === 'completed' ? 'session_gone' : undefined);
}

/**
 * The verdict of the item's first heartbeat: true once the server extended the lease; false when
 * the lease ended first (lost, refused, stopped) or the item was aborted meanwhile.
 */
async function claimed(item: Acquired): Promise<boolean> {
  const signal = item.control.signal;
  let detach = (): void => {};
  const aborted = new Promise<false>((resolve) => (detach = onAbort(signal, () => resolve(false))));
  try {
    return await Promise.race([item.lease.claimed, aborted]);
  } finally {
    detach();
  }
}

// ── Acquire ───────────────────────────────────────────────────────────────────────────────────────

/** Request options every per-item call carries (the caller's, from the worker options). */
type ItemRequestOptions = NonNullable<ResolvedWorkerOptions['requestOptions']> | Record<string, never>;

/** What acquiring an item gives the rest of it. */
interface Acquired {
  /** A client authenticated with the item credential only. */
  client: Anthropic;
  /** The sessions token of the work secret; null when the item runs on the environment key. */
  sessionsToken: string | null;
  requestOptions: ItemRequestOptions;
  /** The item's abort signal and why it fired. */
  control: ItemControl;
  /** Heartbeating already. */
  lease: Lease;
  /** Links each SDK runner of the item to the lease (send retry window, abandoned posts). */
  runnerHooks: RunnerHooks;
}

/**
 * The item credential (the sessions token of the work secret, else the environment key), a client
 * scoped to it, then the lease, heartbeating from now on so a slow download never lets it lapse.
 * Returns the error instead when there is no usable credential: such an item cannot be heartbeated
 * or stopped, and is left to the server to reclaim.
 */
function acquire(
  work: ClaimedWork,
  opts: ResolvedWorkerOptions,
  environmentKey: string | undefined,
  signal: AbortSignal,
  log: Logger,
  clock: TimerClock,
): Acquired | { error: Error } {
  const secret = decodeWorkSecret(work.secret);
  if (secret.status === 'malformed') {
    log.warn('work item secret carries no usable sessions token; falling back to the environment key');
  }
  const credential = secret.sessionsToken ?? environmentKey;
  if (credential === undefined) {
    const error = new MissingInputError(
      'environmentKey',
      'ANTHROPIC_ENVIRONMENT_KEY',
      `work item ${work.id} (its secret yields no sessions token)`,
    );
    log.error({ error: errorSummary(error) }, 'no credential for this work item; it cannot be heartbeated or stopped');
    return { error };
  }
  let client: Anthropic;
  try {
    client = scopedClient(opts.client, credential);
  } catch (e) {
    const error = coerceError(e);
    log.error({ err: error }, 'could not build the client for this work item; it is left to the server to reclaim');
    return { error };
  }
  const requestOptions: ItemRequestOptions = opts.requestOptions ?? {};
  const control = new ItemControl(signal);
  // The TTL is read only when a runner exists, long after the lease.
  const runnerHooks = new RunnerHooks(() => lease.ttlMs);
  const lease = new Lease({
    api: {
      // Sent once: a beat the SDK sent again (a cut answer, from 1.17) would carry an
      // expected_last_heartbeat the first one already replaced, and its 412 would end the lease.
      // The lease beats again itself, with the value it last read.
      heartbeat: (workId, params, options) =>
        client.beta.environments.work.heartbeat(workId, params, { ...requestOptions, signal: options.signal, maxRetries: 0 }),
    },
    workId: work.id,
    environmentId: work.environmentId,
    logger: log,
    clock,
    onTtl: (ttlMs) => runnerHooks.ttlChanged(ttlMs),
  });
  control.watch(lease, work.id);
  lease.start();
  return { client, sessionsToken: secret.sessionsToken, requestOptions, control, lease, runnerHooks };
}

// ── Prepare ───────────────────────────────────────────────────────────────────────────────────────

/**
 * The session to serve, fetched once (skills and memory share it); or why there is none: an item
 * that is not a session, or whose session already terminated, is skipped; one aborted before this
 * point never starts.
 */
async function sessionToServe(work: ClaimedWork, item: Acquired, log: Logger): Promise<BetaManagedAgentsSession | 'skipped' | 'aborted'> {
  const signal = item.control.signal;
  if (signal.aborted) return 'aborted';
  if (work.data.type !== 'session') {
    log.info({ type: work.data.type }, 'not a session work item; stopping it without running anything');
    return 'skipped';
  }
  const session = await item.client.beta.sessions.retrieve(work.data.id, {}, { ...item.requestOptions, signal });
  if (session.status === 'terminated') {
    log.info('session already terminated; stopping its work item without running anything');
    return 'skipped';
  }
  return session;
}

/**
 * Create the tool folder and set up the session's skills in it (a failure is only logged, as the
 * official worker does). Returns the context the file tools and skills work in; the stores'
 * folders join it when they are mounted (see {@link mountStores}).
 */
async function prepare(
  workId: string,
  session: BetaManagedAgentsSession,
  folder: ToolFolder,
  item: Acquired,
  opts: ResolvedWorkerOptions,
  log: Logger,
): Promise<AgentToolContext> {
  const signal = item.control.signal;
  await folder.create({ workId, sessionId: session.id }, log);
  const toolContext: AgentToolContext = {
    workdir: folder.path,
    client: item.client,
    session,
    ...(opts.maxFileBytes !== undefined ? { maxFileBytes: opts.maxFileBytes } : {}),
  };
  await folder.setUpSkills(toolContext, log);
  signal.throwIfAborted();
  return toolContext;
}

/**
 * Take the stores' mount paths and mount them. Their folders join the tools' context as soon as
 * they all exist (the toolset reads its roots at each call, and no call runs before this returns),
 * and `onRoots` is told then, so the session's sandbox can start while the contents are written.
 */
async function mountStores(
  memory: ItemMemory,
  sessionId: string,
  toolContext: AgentToolContext,
  step: ItemStep,
  signal: AbortSignal,
  onRoots: () => void,
): Promise<void> {
  step.enter('waiting for its mount paths');
  await memory.lockPaths(signal);
  step.enter(`mounting the memory stores of session ${sessionId}`);
  await memory.mount(signal, (roots) => {
    toolContext.allowedRoots = roots.all;
    toolContext.readOnlyRoots = roots.readOnly;
    onRoots();
  });
  // Again from the mounted view: a memory port need not report its roots early.
  toolContext.allowedRoots = memory.roots.all;
  toolContext.readOnlyRoots = memory.roots.readOnly;
  signal.throwIfAborted();
}

/** The memory of one session, when memory is on (`intervalMs` is the sync interval). */
function itemMemory(
  deps: WorkItemDeps,
  item: Acquired,
  report: ItemReport,
  spans: MemorySpans,
  session: BetaManagedAgentsSession,
  intervalMs: number,
  placement: StorePlacementMode,
): ItemMemory {
  return new ItemMemory({
    port: deps.memory,
    pathLocks: deps.pathLocks,
    metrics: deps.metrics,
    emit: report.emit,
    listens: report.listens,
    spans,
    client: item.client,
    logger: report.log,
    settings: { ...deps.options, memorySyncIntervalMs: intervalMs },
    workId: report.workId,
    session,
    placement,
  });
}

/** Where the session's store folders live on the host: its own copies when its toolset runs sandboxed. */
function storePlacement(deps: WorkItemDeps, stores: ReturnType<typeof storeResources>, sessionWorkdir: string): StorePlacementMode {
  const opts = deps.options;
  return placementFor({
    customTools: opts.tools !== undefined,
    sandbox: deps.sandbox,
    resources: stores,
    workdir: opts.workdir,
    sessionWorkdir,
  });
}

/** Not a debug line: the agent will find no folder where its instructions say a store is. */
function warnMemoryOff(log: Logger, sessionId: string, stores: ReturnType<typeof storeResources>): void {
  const names = stores.map((r) => `${r.name ? `"${r.name}" ` : ''}(${r.memory_store_id}${r.mount_path ? ` at ${r.mount_path}` : ''})`);
  log.warn(
    {
      stores: names,
      fix: 'drop memorySyncIntervalMs: null (CLI: drop --memory-sync-interval off) to mount them, or detach the stores from the session',
    },
    `memory is off (memorySyncIntervalMs: null): session ${sessionId} runs without its ${stores.length} memory store(s) ${names.join(', ')}; the agent will not find their folders`,
  );
}

// ── Serve ─────────────────────────────────────────────────────────────────────────────────────────

/**
 * How long a runner started before the mount may hold its calls for it. The SDK's runner times a
 * call from its dispatch (two minutes up to SDK 1.15), so a call held longer would fail; past this
 * wait the runner is dropped with its posts abandoned (a call it held never ran and stays
 * unanswered) and a new one starts once the stores are mounted, which runs that call.
 */
export const EARLY_RUNNER_WAIT_MS = 60_000;

/** Why an early runner was dropped: the mount outlasted {@link EARLY_RUNNER_WAIT_MS}. */
class MountOutlastedRunner extends Error {}

/** What serving one session's tool calls works with. */
interface SessionServing {
  deps: WorkItemDeps;
  item: Acquired;
  report: ItemReport;
  step: ItemStep;
  sessionId: string;
  toolContext: AgentToolContext;
  memory: ItemMemory | undefined;
  /** Milliseconds since the item was claimed, for the session's start event. */
  readyMs: () => number;
  /** The hosts of the session agent's MCP servers (a `limited` sandbox network may allow them). */
  mcpHosts: readonly string[];
}

/**
 * Run the session's tool calls until the session ends or the item's signal aborts. The stores
 * mount while the SDK's runner opens the session's event stream and reads its history, so the
 * first call starts as soon as the mount is done; until then every call is held (see
 * {@link MountGate}). The tools (the caller's, the agent toolset in the session's sandbox, or the
 * agent toolset in this process) run behind a guard that brackets each call with the memory sync
 * loop and answers a replayed call from the record. A `tools` factory is called once the stores
 * are mounted (it may read their folders from its context), so its runner starts then. Every
 * process the agent started in the sandbox ends before this returns, so the final sync reads
 * folders nothing writes to any more. Returns `gone` when the API refused to read the session with
 * a 404 (it was deleted): the session's end, not a failure, so its memory still gets the final sync.
 */
async function serve(s: SessionServing): Promise<'ended' | 'gone'> {
  const opts = s.deps.options;
  const serving = new AbortController();
  const unlink = linkAbort(s.item.control.signal, serving);
  const sandbox = sessionSandbox(s);
  const gate = new MountGate(s, serving, () => {
    if (!serving.signal.aborted) sandbox?.warmUp();
  });
  try {
    if (typeof opts.tools === 'function') await gate.ready;
    const own: BetaRunnableTool[] =
      sandbox?.tools() ??
      (typeof opts.tools === 'function' ? opts.tools(s.toolContext) : (opts.tools ?? betaAgentToolset20260401(s.toolContext)));
    const guard = new ToolGuard({
      hooks: gate.ready,
      logger: s.report.log,
      ...(s.deps.toolRecord ? { outcomes: s.deps.toolRecord.forSession(s.sessionId) } : {}),
    });
    const tools = guard.wrapAll(s.deps.wrapTools ? s.deps.wrapTools(own) : own);
    const end = await runRunners(s, gate, serving.signal, tools, guard);
    // The session ended before its stores were mounted: the mount still ends (or fails) first.
    await gate.ready;
    if (guard.replays > 0) s.report.log.info({ replays: guard.replays }, 'replayed tool calls answered from the record');
    return end;
  } finally {
    serving.abort();
    await gate.ready.catch(() => {});
    await sandbox?.close();
    unlink();
  }
}

/** The session's own sandbox, when its agent toolset runs in one. */
function sessionSandbox(s: SessionServing): SessionSandbox | undefined {
  const opts = s.deps.options;
  const runtime = sessionSandboxOf(s.deps.sandbox, opts.tools !== undefined);
  if (runtime === undefined) return undefined;
  const { toolContext, memory, report, sessionId } = s;
  return new SessionSandbox(
    runtime,
    {
      workdir: toolContext.workdir,
      // Read when a host starts: once every store's folder exists.
      get allowedRoots() {
        return toolContext.allowedRoots ?? [];
      },
      get readOnlyRoots() {
        return toolContext.readOnlyRoots ?? [];
      },
      // Per-session store folders: each bound from its host folder at the store's mount path.
      get stores() {
        return memory?.perSession
          ? memory.placements.map((p) => ({ hostPath: p.hostPath, path: p.mountPath, readOnly: p.readOnly }))
          : undefined;
      },
      maxFileBytes: toolContext.maxFileBytes,
      hide: [opts.stateDir ?? defaultStateDir()],
      mcpServerHosts: s.mcpHosts,
      onEgressRefused: (r) => report.egressRefused(sessionId, r),
      sessionId,
      onLimitHit: (hit) => report.sandboxLimitHit(sessionId, hit),
    },
    report.log,
  );
}

/**
 * The race between the stores' mount and the session's runner, in one place. The mount starts at
 * once; the runner may start before it is done, and then its calls wait on {@link ready}. A mount
 * that fails aborts `serving` and is the item's error. A runner that started before the mount and
 * is stopped before it is done (the mount failed, outlasted it, the item ended) has its posts
 * abandoned first (see `RunnerHooks`), so a call it held stays unanswered, never answered unrun.
 * `onRoots`: the store folders exist (the sandbox that binds them may start).
 */
class MountGate {
  /** Resolves with the memory's tool hooks once every store is mounted; rejects with the mount's failure. */
  readonly ready: Promise<SyncLoopView | undefined>;
  #mounted: boolean;
  #failure: { error: unknown } | undefined;

  constructor(s: SessionServing, serving: AbortController, onRoots: () => void) {
    const { memory } = s;
    this.#mounted = memory === undefined;
    const mounting = memory ? mountStores(memory, s.sessionId, s.toolContext, s.step, serving.signal, onRoots) : Promise.resolve();
    this.ready = mounting.then(
      () => {
        this.#mounted = true;
        s.step.enter(`running the tool calls of session ${s.sessionId}`);
        s.report.sessionStarted(s.sessionId, memory?.storeCount ?? 0, s.readyMs());
        onRoots();
        return memory?.toolHooks;
      },
      (e: unknown) => {
        this.#failure = { error: e };
        serving.abort(e);
        throw e;
      },
    );
    this.ready.catch(() => {});
  }

  /** Every store is mounted: a runner started now needs no wait. */
  get mounted(): boolean {
    return this.#mounted;
  }

  /** The mount's failure, once it failed. */
  get failure(): { error: unknown } | undefined {
    return this.#failure;
  }
}

/**
 * Run the session's runner until the session ends. A runner started while the stores mount that
 * is still waiting {@link EARLY_RUNNER_WAIT_MS} later is dropped (its posts abandoned, its tools
 * left open) and a new one starts once the mount is done.
 */
async function runRunners(
  s: SessionServing,
  gate: MountGate,
  serving: AbortSignal,
  tools: BetaRunnableTool[],
  guard: ToolGuard,
): Promise<'ended' | 'gone'> {
  const { item, memory, report, sessionId } = s;
  const { log } = report;
  const earlyWaitMs = s.deps.earlyRunnerWaitMs ?? EARLY_RUNNER_WAIT_MS;
  for (;;) {
    const runnerCtrl = new AbortController();
    const abandon = new AbortController();
    // Posts are abandoned before the runner learns it stops: its answer to a held call is built after.
    const stopRunner = (reason: unknown): void => {
      if (!gate.mounted || item.lease.lost) abandon.abort();
      runnerCtrl.abort(reason);
    };
    const unlinkRunner = onAbort(serving, () => stopRunner(serving.reason));
    // Dropped (and to be replaced) because the mount outlasted it, not because the item ends.
    const replaced = (): boolean => runnerCtrl.signal.reason instanceof MountOutlastedRunner && !serving.aborted;
    const outlasted = gate.mounted
      ? undefined
      : setTimeout(() => {
          if (!gate.mounted) stopRunner(new MountOutlastedRunner());
        }, earlyWaitMs);
    let unlinkHooks = (): void => {};
    try {
      const runner = new SessionToolRunner(sessionId, {
        // With memory, the end of each turn pushes the changed files at once.
        client: memory ? tappingSessionEvents(item.client, (ev) => endsTurn(ev) && memory.sessionIdle()) : item.client,
        // A runner closes its tools when it ends; a replaced one ran none, and the next needs them.
        tools: gate.mounted ? tools : tools.map((t) => closedUnless(t, replaced)),
        ...runnerTuning(s.deps.options),
        signal: runnerCtrl.signal,
      });
      unlinkHooks = item.runnerHooks.attach(runner, { abandon: abandon.signal });
      for await (const call of runner) {
        if (call.posted) guard.posted(call.toolUseId);
        log.debug({ tool: call.name, tool_use_id: call.toolUseId, is_error: call.isError, posted: call.posted }, 'tool call done');
      }
    } catch (e) {
      const failure = gate.failure;
      if (failure !== undefined) throw failure.error;
      // The runner failed while the stores were mounting: say so, not "mounting".
      if (!gate.mounted) s.step.enter(`running the tool calls of session ${sessionId}`);
      // SDK 1.16 throws the API's permanent refusal to read the session (earlier runners end quietly).
      if (statusOf(e) !== 404 || serving.aborted) throw e;
      log.warn(
        { error: errorSummary(e) },
        'the session is gone (404 on reading it); its memory gets the final sync and the work item is stopped',
      );
      return 'gone';
    } finally {
      clearTimeout(outlasted);
      unlinkHooks();
      unlinkRunner();
    }
    if (!replaced()) return 'ended';
    log.info({ waited_ms: earlyWaitMs }, 'the mount outlasted the early runner; a new runner starts once the stores are mounted');
    await gate.ready;
  }
}

/**
 * The worker options a session's runner takes, as the official worker passes them: each only when
 * it differs from the runner's own default. `maxConcurrentCalls` is read by SDK 1.16 and later;
 * earlier runners run one call at a time whatever it says.
 */
export function runnerTuning(
  opts: Pick<ResolvedWorkerOptions, 'maxIdleMs' | 'maxConcurrentCalls' | 'requestOptions'>,
): Pick<SessionToolRunnerOptions, 'maxIdleMs' | 'requestOptions'> & { maxConcurrentCalls?: number | null } {
  return {
    ...(opts.maxIdleMs !== undefined ? { maxIdleMs: opts.maxIdleMs } : {}),
    ...(opts.maxConcurrentCalls !== 1 ? { maxConcurrentCalls: opts.maxConcurrentCalls } : {}),
    ...(opts.requestOptions !== undefined ? { requestOptions: opts.requestOptions } : {}),
  };
}

/** `tool`, whose `close` does nothing when `skip()` says so at the time it is called. */
function closedUnless(tool: BetaRunnableTool, skip: () => boolean): BetaRunnableTool {
  return new Proxy(tool, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (prop === 'close' && typeof value === 'function') return () => (skip() ? undefined : (value as () => unknown).call(target));
      return value;
    },
  });
}

// ── Tear down ─────────────────────────────────────────────────────────────────────────────────────

/**
 * Run whatever happened before; never throws. In order: count the run out of its tool folder (the
 * last run of the session out cleans its skills and folder); end the memory (`finalSync` first on
 * a clean end), which releases the mount paths; stop listening to the caller; stop heartbeating;
 * then force-stop the item, unless the lease was lost (or its first beat refused): someone else may
 * hold it now. Returns the memory's finish report, if it made one.
 */
async function tearDown(
  work: ClaimedWork,
  item: Acquired,
  report: ItemReport,
  folder: ToolFolder | undefined,
  memory: ItemMemory | undefined,
  finalSync: boolean,
): Promise<FinishReport | undefined> {
  const { lease } = item;
  await folder?.leave(report.log);
  const flush = await memory?.finish(finalSync);
  item.control.dispose();
  await lease.release();
  if (lease.claimRefused) {
    report.log.warn('the first heartbeat was refused; the work item is not ours, so it is not stopped');
  } else if (lease.lostAs !== undefined) {
    report.leaseLost(lease.lostAs);
  } else if (await stopServedWork(item.client, { workId: work.id, environmentId: work.environmentId }, item.requestOptions, report.log)) {
    report.emit('workStopped', { workId: work.id });
  }
  return flush;
}

// ── Report ────────────────────────────────────────────────────────────────────────────────────────

/**
 * What one work item tells the world: its logger (scoped to its work and session ids), its events
 * and its counters, and the outcome it returns, timed from the report's creation on `clock`.
 */
class ItemReport {
  readonly workId: string;
  /** The session id, when the item is a session. */
  readonly sessionId: string | undefined;
  readonly log: Logger;
  readonly emit: WorkerEmit;
  /** True when the worker has a listener for `name`: an event nobody hears need not be built. */
  readonly listens: (name: keyof WorkerEventMap) => boolean;
  readonly #metrics: WorkerMetrics;
  readonly #clock: TimerClock;
  readonly #startedAt: number;
  /** The session's tools started (its `sessionStarted` event went out), so `sessionEnded` follows. */
  #started = false;

  constructor(work: ClaimedWork, logger: Logger, emitter: EventEmitter<WorkerEventMap>, metrics: WorkerMetrics, clock: TimerClock) {
    this.workId = work.id;
    this.sessionId = work.data.type === 'session' ? work.data.id : undefined;
    this.log = logger.child({ work_id: work.id, ...(this.sessionId ? { session_id: this.sessionId } : {}) });
    this.emit = (name, ...payload) => safeEmit(emitter, this.log, name, ...payload);
    this.listens = (name) => emitter.listenerCount(name) > 0;
    this.#metrics = metrics;
    this.#clock = clock;
    this.#startedAt = clock.now();
  }

  /** The item could not even be acquired: count it failed and say so. */
  notAcquired(error: Error): ItemOutcome {
    this.#metrics.add('itemsFailed');
    this.emit('workFailed', { workId: this.workId, sessionId: this.sessionId, error });
    return this.#outcome('failed', error);
  }

  /** The session's tools are about to run: say how long the item took to get there. */
  sessionStarted(sessionId: string, stores: number, readyMs: number): void {
    this.#started = true;
    this.log.info({ stores, ready_ms: readyMs }, 'session started');
    this.emit('sessionStarted', { workId: this.workId, sessionId, stores, readyMs });
  }

  /** The lease was lost: the item is left to its new owner, never stopped by us. */
  /** The session's sandbox refused a connection: logged, counted and emitted with the rule. */
  egressRefused(sessionId: string, r: { host: string; port: number; rule: string; address?: string }): void {
    this.#metrics.add('egressRefused');
    this.log.warn({ host: r.host, port: r.port, rule: r.rule, address: r.address }, 'sandbox network connection refused');
    this.emit('egressRefused', {
      workId: this.workId,
      sessionId,
      host: r.host,
      port: r.port,
      rule: r.rule,
      ...(r.address !== undefined ? { address: r.address } : {}),
    });
  }

  leaseLost(reason: 'lease_lost' | 'assumed_lost'): void {
    this.#metrics.add('leaseLosses');
    this.log.warn({ reason }, 'lease lost; the work item is left to its new owner, not stopped');
    this.emit('leaseLost', { workId: this.workId, sessionId: this.sessionId, reason });
  }

  /** A tool call of the session reached a limit of its sandbox: log it, count it, emit it. */
  sandboxLimitHit(sessionId: string, hit: SandboxLimitHit): void {
    this.#metrics.add(
      hit.limit === 'memory' ? 'sandboxMemoryLimitHits' : hit.limit === 'processes' ? 'sandboxProcessLimitHits' : 'sandboxTmpFull',
    );
    this.log.warn({ limit: hit.limit, value: hit.value, count: hit.count }, `${hit.message}; the session goes on`);
    this.emit('sandboxLimitHit', { workId: this.workId, sessionId, ...hit });
  }

  /** The item ran its course (tear-down included): count it, log it, and close its session's events. */
  ended(status: ItemStatus, error: Error | undefined, flush: FinishReport | undefined, reason?: ItemOutcome['reason']): ItemOutcome {
    const outcome = { ...this.#outcome(status, error), ...(reason ? { reason } : {}) };
    if (status === 'failed') {
      this.#metrics.add('itemsFailed');
      this.log.error({ error: errorSummary(error) }, 'work item failed');
      this.log.debug({ err: error }, 'work item failure, with its stack');
      this.emit('workFailed', { workId: this.workId, sessionId: this.sessionId, error: error ?? new Error('work item failed') });
    } else if (status === 'completed' || status === 'skipped' || status === 'stopped_by_server') {
      this.#metrics.add('itemsCompleted');
    }
    this.log.info({ status, ...(reason ? { reason } : {}), duration_ms: outcome.durationMs }, 'work item done');
    if (this.#started && this.sessionId !== undefined) {
      this.emit('sessionEnded', { workId: this.workId, sessionId: this.sessionId, outcome, ...(flush ? { flush } : {}) });
    }
    return outcome;
  }

  #outcome(status: ItemStatus, error: Error | undefined): ItemOutcome {
    return {
      workId: this.workId,
      sessionId: this.sessionId,
      status,
      ...(error ? { error } : {}),
      durationMs: this.#clock.now() - this.#startedAt,
    };
  }
}

/** What a work item is doing, so a failure of the API says which step failed. */
export class ItemStep {
  readonly #workId: string;
  #current: string;

  constructor(workId: string, first: string) {
    this.#workId = workId;
    this.#current = first;
  }

  enter(step: string): void {
    this.#current = step;
  }

  /**
   * The error an item reports for `e`: an API failure becomes a RemoteApiError naming the item and
   * the step (status, request id and retryable kept); our own errors stay as they are.
   */
  failure(e: unknown): Error {
    return isApiError(e) && !(e instanceof WorkerError)
      ? toRemoteApiError(e, `work item ${this.#workId}: ${this.#current}`)
      : coerceError(e);
  }
}
