import { EventEmitter, setMaxListeners } from 'node:events';
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { ConfigError, MissingInputError, WorkItemFailedError } from '../errors.js';
import { linkAbort, onAbort } from '../internal/abort.js';
import { resolveLogger, type Logger } from '../internal/logger.js';
import { safeEmit } from '../internal/safe-emit.js';
import type { ItemOutcome, WorkerEventMap } from './events.js';
import { runWorkItem } from './work-item.js';
import { defaultMemoryPort } from './default-memory-port.js';
import type { MemoryPort } from './memory-port.js';
import { WorkerMetrics, type WorkerMetricsSnapshot } from './metrics.js';
import { assertPosixPlatform, resolveWorkerOptions, type EnvironmentWorkerOptions, type ResolvedWorkerOptions } from './options.js';
import { ToolCallRecord } from './tool-guard.js';
import { PathLocks } from './path-locks.js';
import { defaultWorkerId, Poller, workQueueApi, type ClaimedWork, type ClaimSlots } from './poller.js';
import { scopedClient } from './scoped-client.js';
import { preloadPageTransport } from '../api/page-fetch.js';
import { defaultStateDir } from '../memory/index.js';
import { resolveSandbox, sandboxForServing, type SandboxServing } from '../sandbox/resolve.js';
import { releaseSandboxRuntime, type SandboxRuntime } from '../sandbox/runtime.js';
import { sweepEmptySessionFolders } from './store-placement.js';

export type { ItemOutcome, ItemStatus, WorkerEventMap } from './events.js';
export type { WorkerMetricsSnapshot } from './metrics.js';
export type { EnvironmentWorkerOptions, EnvironmentWorkerTools } from './options.js';

/** One already-claimed item for {@link EnvironmentWorker.handleItem}; each field falls back to its `ANTHROPIC_*` variable. */
export interface HandleItemOptions {
  /** Falls back to `ANTHROPIC_WORK_ID`. */
  workId?: string;
  /** Falls back to `ANTHROPIC_ENVIRONMENT_ID`. */
  environmentId?: string;
  /** Falls back to `ANTHROPIC_SESSION_ID`. */
  sessionId?: string;
  /** Falls back to the worker's `environmentKey`, then `ANTHROPIC_ENVIRONMENT_KEY`. Needed only without a usable secret. */
  environmentKey?: string;
  /** The item's `secret` from the poll response. Falls back to `ANTHROPIC_WORK_SECRET`. */
  workSecret?: string;
  /** Aborting it ends this item the way close() does. */
  signal?: AbortSignal;
}

/** @internal construction hooks for tests. */
export interface WorkerInternals {
  memory?: MemoryPort;
  /** Wraps each session's tools (sandboxed or not) before the replay guard: the soak counts runs with it. */
  wrapTools?: (tools: BetaRunnableTool[]) => BetaRunnableTool[];
  /** Where tool outcomes are kept until posted (tests inspect its size). */
  toolRecord?: ToolCallRecord;
  /** How long a runner started before the mount holds its calls (default {@link EARLY_RUNNER_WAIT_MS}). */
  earlyRunnerWaitMs?: number;
}

function env(name: string): string | undefined {
  const v = process.env[name];
  return v === undefined || v === '' ? undefined : v;
}

/**
 * Serves Claude Managed Agents sessions of a self-hosted environment on this machine, with their
 * memory stores mounted as folders and kept in sync.
 *
 * - `run()` claims work (long polls with the environment key) and serves up to `concurrency`
 *   sessions at once; it polls only while a slot is free.
 * - `handleItem()` serves one item something else claimed (webhook, launcher); as the official
 *   worker's, it rejects when the item failed and resolves otherwise.
 * - Every item is claimed by its first heartbeat before its session is read, anything is
 *   downloaded or any tool runs; a 412 or another permanent refusal of that beat leaves the item
 *   unserved and not stopped (it is someone else's).
 * - `close()` stops claiming, ends every running session (final sync, bounded flush, folders
 *   removed, item stopped) and resolves when all have; aborting `options.signal` does the same.
 * - One bad item never stops the worker; only a permanent poll failure (bad key, unknown
 *   environment) ends `run()`, with that error.
 *
 * The library never installs signal handlers; wire SIGTERM to `close()` yourself (the CLI does).
 */
export class EnvironmentWorker extends EventEmitter<WorkerEventMap> {
  /** This worker's id, sent as `Anthropic-Worker-ID` on every poll: the `workerId` option, else `<host name>-<uuid>`. */
  readonly workerId: string;
  readonly #opts: ResolvedWorkerOptions;
  readonly #log: Logger;
  readonly #metrics = new WorkerMetrics();
  readonly #pathLocks: PathLocks;
  readonly #toolRecord: ToolCallRecord;
  readonly #sessionFolders = new Map<string, number>();
  readonly #memory: MemoryPort;
  readonly #wrapTools: WorkerInternals['wrapTools'];
  readonly #earlyRunnerWaitMs: number | undefined;
  readonly #closeCtrl = new AbortController();
  readonly #active = new Set<Promise<ItemOutcome>>();
  #slotWaiters: Array<() => void> = [];
  /** Slots the poller holds: polls in flight and items acknowledged but not started yet. */
  #claimsHeld = 0;
  readonly #claimSlots: ClaimSlots = {
    reserve: (signal) => this.#reserveSlot(signal),
    tryReserve: () => {
      if (this.#freeSlots() <= 0) return false;
      this.#claimsHeld++;
      return true;
    },
    release: () => {
      this.#claimsHeld--;
      this.#wakeSlotWaiter();
    },
  };
  #idleWaiters: Array<() => void> = [];
  #closePromise: Promise<void> | undefined;
  #running = false;
  #poller: Poller | undefined;
  /** Operations (run, handleItem) listening on the constructor's signal right now. */
  #signalUsers = 0;
  readonly #onSignalAbort = (): void => void this.close();
  #warnedOverConcurrency = false;
  #sandbox: Promise<SandboxRuntime> | undefined;
  /** readyToServe() was called: this worker serves sessions from a queue, whatever its concurrency. */
  #servesQueue = false;

  /**
   * Validates `options` and fills in their defaults; throws {@link ConfigError} naming each bad option,
   * and {@link PlatformError} on Windows. Claims nothing until `run()` or `handleItem()`.
   */
  constructor(options: EnvironmentWorkerOptions, internals: WorkerInternals = {}) {
    super();
    assertPosixPlatform();
    this.#opts = resolveWorkerOptions(options);
    this.workerId = this.#opts.workerId ?? defaultWorkerId();
    this.#log = resolveLogger(this.#opts.logger).child({ worker_id: this.workerId });
    this.#toolRecord = internals.toolRecord ?? new ToolCallRecord({ logger: this.#log });
    this.#memory = internals.memory ?? defaultMemoryPort;
    this.#wrapTools = internals.wrapTools;
    this.#earlyRunnerWaitMs = internals.earlyRunnerWaitMs;
    this.#pathLocks = new PathLocks(this.#opts.clock);
    // Every running item and the poller listen on the close signal.
    setMaxListeners(this.#opts.concurrency * 2 + 16, this.#closeCtrl.signal);
    // The constructor's signal is listened to only while run() or handleItem() is under way, so a
    // long-lived signal shared by many workers (one per webhook request) keeps none of them alive.
    if (this.#opts.signal?.aborted) void this.close();
  }

  /** Sessions running now. */
  get activeSessions(): number {
    return this.#active.size;
  }

  /** Monotonic ms of the last successful poll, for readiness probes. */
  get lastPollOkAt(): number | undefined {
    return this.#poller?.lastOkAt;
  }

  /** True once close() was called (or the signal aborted). */
  get closing(): boolean {
    return this.#closePromise !== undefined || this.#opts.signal?.aborted === true;
  }

  /** The worker's counters since it was made, and the sessions running now, as a plain object. */
  metrics(): WorkerMetricsSnapshot {
    return this.#metrics.snapshot(this.#active.size);
  }

  /** Resolves when no session is running. */
  onIdle(): Promise<void> {
    if (this.#active.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /**
   * Poll for work and serve it until close() or `signal` (or the constructor's signal) aborts, then
   * resolve once every session has finished. Rejects with a RemoteApiError on a permanent poll
   * failure, after the sessions already running have ended.
   */
  async run(signal?: AbortSignal): Promise<void> {
    const { environmentId, environmentKey } = this.#opts;
    if (environmentId === undefined || environmentKey === undefined) {
      const missing = [
        ...(environmentId === undefined
          ? ['environmentId: expected a non-empty string, got undefined (is ANTHROPIC_ENVIRONMENT_ID set?)']
          : []),
        ...(environmentKey === undefined
          ? ['environmentKey: expected a non-empty string, got undefined (is ANTHROPIC_ENVIRONMENT_KEY set?)']
          : []),
      ];
      throw new ConfigError(
        `run() needs environmentId and environmentKey to poll for work; pass them to the EnvironmentWorker constructor:\n  ${missing.join('\n  ')}`,
        missing,
      );
    }
    if (this.#running) throw new ConfigError('run() is already running on this worker; call it once');
    this.#running = true;
    try {
      // Before anything is claimed: a worker that cannot isolate its sessions does not start.
      const sandbox = await this.#sandboxFor('sessions');
      preloadPageTransport();
      const poller = new Poller({
        api: workQueueApi(scopedClient(this.#opts.client, environmentKey), this.#opts.requestOptions),
        environmentId,
        workerId: this.workerId,
        logger: this.#log.child({ component: 'poller' }),
        clock: this.#opts.clock,
        slots: this.#claimSlots,
        onPolled: (workId) => safeEmit(this, this.#log, 'polled', { workId }),
        onPollFailed: (error, retryInMs) => safeEmit(this, this.#log, 'pollFailed', { error, retryInMs }),
      });
      this.#poller = poller;
      const detachRunSignal = onAbort(signal, () => void this.close());
      const detachOwnSignal = this.#listenToOwnSignal();
      try {
        if (this.#opts.memorySyncIntervalMs !== null) {
          // Leftovers of a worker that died on this host: entries with nothing to save are dropped,
          // the others named (the next session of their store adopts them).
          await this.#memory.sweep?.({ logger: this.#log, stateDir: this.#opts.stateDir });
          await sweepEmptySessionFolders(this.#opts.stateDir ?? defaultStateDir());
        }
        this.#log.info({ environment_id: environmentId, concurrency: this.#opts.concurrency }, 'worker polling for work');
        for await (const work of poller.claims(this.#closeCtrl.signal)) {
          // The slot the poll held now belongs to the running item.
          this.#claimsHeld--;
          this.#startItem(work, environmentKey, sandbox);
        }
      } finally {
        detachRunSignal();
        detachOwnSignal();
        await this.#drained();
      }
    } finally {
      this.#running = false;
    }
  }

  /**
   * Resolves once this worker may serve sessions from a queue: its sandbox decided and, with
   * `sandbox: 'auto'` on Linux, working. Rejects with a {@link SandboxUnavailableError} naming the
   * cause and the fix otherwise. `run()` and the webhook handler call it before they claim
   * anything; `handleItem()` on this worker then holds sessions to the same rule.
   */
  async readyToServe(): Promise<void> {
    this.#servesQueue = true;
    await this.#sandboxFor('sessions');
  }

  /**
   * Serve one already-claimed work item (webhook handler, one-sandbox-per-session launcher). Each
   * field falls back to its `ANTHROPIC_*` variable; the first required value still missing is named
   * in the MissingInputError thrown before anything is sent.
   *
   * As the official worker's `handleItem()` (so switching is one import line): rejects when the item
   * failed (no usable credential, the session could not be fetched, memory could not be mounted,
   * the runner failed, and so on) with a {@link WorkItemFailedError} whose `cause` is the typed reason and
   * whose `outcome` says how it ended; resolves with the {@link ItemOutcome} in every other case
   * (`completed`, `skipped`, `lease_lost`, `stopped_by_server`, `aborted`). Either way the item's
   * teardown (final sync or flush, folders removed, item stopped unless the lease was lost) has run
   * by then.
   */
  async handleItem(opts: HandleItemOptions = {}): Promise<ItemOutcome> {
    const workId = opts.workId || env('ANTHROPIC_WORK_ID');
    const environmentId = opts.environmentId || env('ANTHROPIC_ENVIRONMENT_ID');
    const sessionId = opts.sessionId || env('ANTHROPIC_SESSION_ID');
    const environmentKey = opts.environmentKey || this.#opts.environmentKey || env('ANTHROPIC_ENVIRONMENT_KEY');
    const workSecret = opts.workSecret || env('ANTHROPIC_WORK_SECRET');
    if (!workId) throw new MissingInputError('workId', 'ANTHROPIC_WORK_ID');
    if (!environmentId) throw new MissingInputError('environmentId', 'ANTHROPIC_ENVIRONMENT_ID');
    if (!sessionId) throw new MissingInputError('sessionId', 'ANTHROPIC_SESSION_ID');
    if (!environmentKey && !workSecret) {
      throw new MissingInputError('environmentKey (or workSecret)', 'ANTHROPIC_ENVIRONMENT_KEY or ANTHROPIC_WORK_SECRET');
    }
    const work: ClaimedWork = { id: workId, environmentId, data: { type: 'session', id: sessionId }, secret: workSecret ?? null };
    const sandbox = await this.#sandboxFor(this.#servesQueue || this.#opts.concurrency > 1 ? 'sessions' : 'one-session');
    if (this.#active.size >= this.#opts.concurrency && !this.#warnedOverConcurrency) {
      this.#warnedOverConcurrency = true;
      this.#log.warn(
        { active_sessions: this.#active.size, concurrency: this.#opts.concurrency },
        'handleItem() called while `concurrency` sessions already run on this worker; with concurrency 1 they share ' +
          "the workdir (files and skills folders). Construct the worker with `concurrency` at least the number of items you serve at once (e.g. the webhook handler's)",
      );
    }
    const detachOwnSignal = this.#listenToOwnSignal();
    let outcome: ItemOutcome;
    try {
      outcome = await this.#startItem(work, environmentKey, sandbox, opts.signal);
    } finally {
      detachOwnSignal();
    }
    if (outcome.status === 'failed') throw new WorkItemFailedError({ ...outcome, status: 'failed' });
    return outcome;
  }

  /**
   * Stop claiming, end every running session (final sync and bounded flush, folders removed, items
   * stopped) and resolve when all have. Idempotent: every call returns the same promise.
   */
  close(): Promise<void> {
    this.#closePromise ??= (async () => {
      this.#log.info({ active_sessions: this.#active.size }, 'worker closing');
      safeEmit(this, this.#log, 'closing', {});
      this.#closeCtrl.abort(new Error('worker closing'));
      for (const wake of this.#slotWaiters.splice(0)) wake();
      await this.#drained();
      // Every session has ended: the sandboxes' empty parent cgroups go with the worker.
      const runtime = await this.#sandbox?.catch(() => undefined);
      if (runtime !== undefined) {
        const released = releaseSandboxRuntime(runtime);
        if (released.length > 0) this.#log.debug({ cgroups: released }, "removed the sandboxes' parent cgroups");
      }
      this.#log.info('worker closed');
      safeEmit(this, this.#log, 'closed', {});
    })();
    return this.#closePromise;
  }

  /**
   * What this worker runs its sessions' tools in: decided (and probed) once, at the first run(),
   * readyToServe() or handleItem(), then held to how many sessions the caller serves (see
   * `sandbox/resolve.ts`): a refusal where sessions share the process, a warning where one runs.
   */
  async #sandboxFor(serving: SandboxServing): Promise<SandboxRuntime> {
    this.#sandbox ??= resolveSandbox(this.#opts.sandbox, {
      log: this.#log,
      concurrency: this.#opts.concurrency,
      stateDir: this.#opts.stateDir ?? defaultStateDir(),
    }).then((runtime) => {
      if (runtime.kind === 'bwrap' && this.#opts.tools !== undefined) {
        this.#log.warn('custom `tools` run in the worker process, outside the sandbox; only the default agent toolset runs sandboxed');
      }
      return runtime;
    });
    return sandboxForServing(await this.#sandbox, serving, this.#log);
  }

  #startItem(work: ClaimedWork, environmentKey: string | undefined, sandbox: SandboxRuntime, signal?: AbortSignal): Promise<ItemOutcome> {
    const claimedAt = this.#opts.clock.now();
    this.#metrics.add('itemsClaimed');
    safeEmit(this, this.#log, 'workClaimed', {
      workId: work.id,
      sessionId: work.data.type === 'session' ? work.data.id : undefined,
      environmentId: work.environmentId,
    });
    const itemCtrl = new AbortController();
    const detach = [linkAbort(this.#closeCtrl.signal, itemCtrl), linkAbort(signal, itemCtrl)];
    const deps = {
      options: this.#opts,
      logger: this.#log,
      emitter: this,
      metrics: this.#metrics,
      pathLocks: this.#pathLocks,
      memory: this.#memory,
      toolRecord: this.#toolRecord,
      sessionFolders: this.#sessionFolders,
      clock: this.#opts.clock,
      sandbox,
      ...(this.#wrapTools ? { wrapTools: this.#wrapTools } : {}),
      ...(this.#earlyRunnerWaitMs !== undefined ? { earlyRunnerWaitMs: this.#earlyRunnerWaitMs } : {}),
    };
    const p: Promise<ItemOutcome> = runWorkItem(deps, { work, environmentKey, claimedAt, signal: itemCtrl.signal })
      .catch((e: unknown) => {
        // runWorkItem does not throw; this is the last line of defence so one item never stops the worker.
        this.#log.error({ err: e, work_id: work.id }, 'work item crashed');
        return { workId: work.id, sessionId: undefined, status: 'failed' as const, error: e as Error, durationMs: 0 };
      })
      .finally(() => {
        for (const d of detach) d();
        this.#active.delete(p);
        this.#wakeSlotWaiter();
        if (this.#active.size === 0) for (const wake of this.#idleWaiters.splice(0)) wake();
      });
    this.#active.add(p);
    return p;
  }

  /** Make the constructor's signal close the worker until the returned function is called. */
  #listenToOwnSignal(): () => void {
    const signal = this.#opts.signal;
    if (!signal) return () => {};
    if (signal.aborted) {
      void this.close();
      return () => {};
    }
    if (this.#signalUsers++ === 0) signal.addEventListener('abort', this.#onSignalAbort, { once: true });
    let detached = false;
    return () => {
      if (detached) return;
      detached = true;
      if (--this.#signalUsers === 0) signal.removeEventListener('abort', this.#onSignalAbort);
    };
  }

  /** Session slots neither running an item nor held by the poller. */
  #freeSlots(): number {
    return this.#opts.concurrency - this.#active.size - this.#claimsHeld;
  }

  /** Hold a slot for a poll once one is free; false when `signal` aborted first. */
  #reserveSlot(signal: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      const onAbort = (): void => {
        const i = this.#slotWaiters.indexOf(attempt);
        if (i >= 0) this.#slotWaiters.splice(i, 1);
        resolve(false);
      };
      const attempt = (): void => {
        if (signal.aborted) return onAbort();
        if (this.#freeSlots() <= 0) return void this.#slotWaiters.push(attempt);
        signal.removeEventListener('abort', onAbort);
        this.#claimsHeld++;
        resolve(true);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      attempt();
    });
  }

  #wakeSlotWaiter(): void {
    this.#slotWaiters.shift()?.();
  }

  async #drained(): Promise<void> {
    while (this.#active.size > 0) await Promise.allSettled([...this.#active]);
  }
}
