import type Anthropic from '@anthropic-ai/sdk';
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';
import { coerceError } from '../errors.js';
import { combineSignals } from '../internal/abort.js';
import { errorSummary, type Logger } from '../internal/logger.js';
import type { MEMORY_EVENT_NAMES, WorkerEmit } from './events.js';
import { forwardMemoryEvents } from './memory-events.js';
import type { FinishReport, MemoryPort, MountedSessionView, SyncLoopView } from './memory-port.js';
import { MemorySpans } from './memory-spans.js';
import type { WorkerMetrics } from './metrics.js';
import type { ResolvedWorkerOptions } from './options.js';
import { mountPathsOf, type PathLocks } from './path-locks.js';
import { assertMountRootsOutsideWorkerFolders } from './mount-root-guard.js';
import { defaultStateDir } from '../memory/index.js';
import {
  assertMountPathsAllowed,
  createSessionStoresFolder,
  placeStores,
  removeSessionStoresFolder,
  sessionStoresFolder,
  sessionWithHostPaths,
  type StorePlacement,
  type StorePlacementMode,
} from './store-placement.js';

/** Slack on top of finalFlushMs before the worker stops waiting for the memory core's own bound. */
export const FINISH_SLACK_MS = 2_000;

/** The worker options one item's memory reads; memory is on, so the sync interval is a number. */
export type ItemMemorySettings = Pick<
  ResolvedWorkerOptions,
  | 'workdir'
  | 'stateDir'
  | 'memoryCacheBytes'
  | 'allowedMountRoots'
  | 'mountTimeoutMs'
  | 'memorySyncDeletions'
  | 'memoryDeleteAfterMs'
  | 'finalFlushMs'
  | 'pathWaitMs'
> & { memorySyncIntervalMs: number; memoryBufferBytes?: number };

export interface ItemMemoryOptions {
  port: MemoryPort;
  pathLocks: PathLocks;
  metrics: WorkerMetrics;
  emit: WorkerEmit;
  /** True when the worker has a listener for an event (one nobody hears is not built). */
  listens?: (name: (typeof MEMORY_EVENT_NAMES)[number]) => boolean;
  /** The item's memory spans; none when tracing is off. */
  spans?: MemorySpans;
  /** Scoped to the item credential. */
  client: Anthropic;
  logger: Logger;
  settings: ItemMemorySettings;
  workId: string;
  session: BetaManagedAgentsSession;
  /** Where the store folders live on the host (see {@link StorePlacementMode}). Default `'shared'`. */
  placement?: StorePlacementMode;
}

/**
 * The memory stores of one work item's session, from the path locks to the end.
 *
 * Order: {@link ItemMemory.lockPaths} waits until no other session of this worker holds one of the stores'
 * mount paths (up to `pathWaitMs`) and takes them all; {@link ItemMemory.mount} mounts the stores and starts
 * their sync loop; {@link ItemMemory.finish} always runs, whatever got done: the final sync (on a clean end)
 * and the push-only flush with the unmount, bounded by `finalFlushMs` (plus a slack after which
 * the worker stops waiting), then stops forwarding events and releases the paths. Meanwhile the
 * memory events are forwarded as worker events with the item's ids, and counted.
 */
export class ItemMemory {
  readonly #o: ItemMemoryOptions;
  readonly #spans: MemorySpans;
  readonly #log: Logger;
  readonly #detach: Array<() => void> = [];
  #releasePaths: () => void = () => {};
  /** Where each store is, once the paths are taken; host folders are real spellings once mounted. */
  #placements: StorePlacement[] = [];
  /** The session's own folder of per-session store folders, once created. */
  #sessionFolder: string | undefined;
  #mounted: MountedSessionView | undefined;
  #loop: SyncLoopView | undefined;
  #finished: Promise<FinishReport | undefined> | undefined;

  constructor(opts: ItemMemoryOptions) {
    this.#o = opts;
    this.#spans = opts.spans ?? new MemorySpans(undefined, undefined);
    this.#log = opts.logger;
  }

  /** How many stores are mounted. */
  get storeCount(): number {
    return this.#mounted?.stores.length ?? 0;
  }

  /** The mounted store folders, and those of them that are read-only (for the file tools). */
  get roots(): { all: string[]; readOnly: string[] } {
    return { all: [...(this.#mounted?.roots ?? [])], readOnly: [...(this.#mounted?.readOnlyRoots ?? [])] };
  }

  /**
   * Each store's host folder and the path the agent sees it at (the same path when shared): what a
   * sandbox binds.
   */
  get placements(): StorePlacement[] {
    return this.#placements.map((p) => ({ ...p }));
  }

  /** True when the stores are folders of this session's own, bound at their mount paths by its sandbox. */
  get perSession(): boolean {
    return this.#o.placement === 'per-session';
  }

  /** The sync loop, which brackets each tool call; none until mounted. */
  get toolHooks(): SyncLoopView | undefined {
    return this.#loop;
  }

  /** The session went idle (the agent's turn ended): its changed memory files go up now. Never throws. */
  sessionIdle(): void {
    try {
      this.#loop?.sessionIdle?.();
    } catch (e) {
      this.#log.warn({ error: errorSummary(coerceError(e)) }, 'memory push on idle could not start; the next sync uploads the changes');
    }
  }

  /**
   * Take every host folder of the session's stores, waiting while another session holds one: with
   * shared placement their mount paths, with per-session placement folders of this session's own
   * (only another run of the same session can hold them).
   */
  async lockPaths(signal: AbortSignal): Promise<void> {
    const { settings, session, workId } = this.#o;
    const stateDir = settings.stateDir ?? defaultStateDir();
    const resources = storeResources(session);
    assertMountRootsOutsideWorkerFolders(resources, { workdir: settings.workdir, stateDir });
    if (this.#o.placement === 'per-session') {
      this.#placements = placeStores(resources, settings.workdir, sessionStoresFolder(stateDir, session.id));
      assertMountPathsAllowed(this.#placements, settings.allowedMountRoots);
    } else {
      this.#placements = placeStores(resources, settings.workdir, undefined);
    }
    this.#releasePaths = await this.#o.pathLocks.acquire(
      this.#o.placement === 'per-session' ? this.#placements.map((p) => p.hostPath) : mountPathsOf(resources, settings.workdir),
      { sessionId: session.id, workId },
      {
        waitMs: settings.pathWaitMs,
        signal,
      },
    );
  }

  /**
   * Mount the session's stores, then start their sync loop. `onRoots` is called as soon as every
   * store's folder exists, before the contents are written.
   */
  async mount(signal: AbortSignal, onRoots?: (roots: { all: string[]; readOnly: string[] }) => void): Promise<void> {
    const { port, client, settings, workId } = this.#o;
    const log = this.#log;
    let session = this.#o.session;
    let allowedMountRoots = settings.allowedMountRoots;
    if (this.#o.placement === 'per-session') {
      // Created once the paths are held: a run of the same session ending meanwhile removes it when empty.
      const stateDir = settings.stateDir ?? defaultStateDir();
      this.#sessionFolder = await createSessionStoresFolder(sessionStoresFolder(stateDir, session.id));
      this.#placements = placeStores(storeResources(session), settings.workdir, this.#sessionFolder);
      session = sessionWithHostPaths(session, this.#placements);
      allowedMountRoots = [this.#sessionFolder];
      for (const p of this.#placements) {
        log.info(
          { memory_store_id: p.storeId, host_path: p.hostPath, mount_path: p.mountPath, read_only: p.readOnly },
          "memory store folder of this session's own; its sandbox sees it at mount_path",
        );
      }
    }
    const mounter = port.mounter({
      client,
      logger: log,
      workdir: settings.workdir,
      stateDir: settings.stateDir,
      contentCacheBytes: settings.memoryCacheBytes,
      allowedMountRoots,
      mountTimeoutMs: settings.mountTimeoutMs,
      deletions: settings.memorySyncDeletions,
      deleteAfterMs: settings.memoryDeleteAfterMs,
      ...(settings.memoryBufferBytes !== undefined ? { bufferBytes: settings.memoryBufferBytes } : {}),
    });
    this.#forward(mounter);
    const count = storeResources(session).length;
    this.#mounted = await this.#spans.mount(count, (wrapStore) =>
      mounter.mount(session, {
        signal,
        workId,
        wrapStore,
        ...(onRoots ? { onRoots } : {}),
        // Each session's own copies are bound into its sandbox, a read-only store's read-only: no
        // agent can write through a link to the content cache.
        linkReadOnly: this.#o.placement === 'per-session',
      }),
    );
    this.#loop = port.syncLoop({
      client,
      mounted: this.#mounted,
      intervalMs: settings.memorySyncIntervalMs,
      deletions: settings.memorySyncDeletions,
      finalFlushMs: settings.finalFlushMs,
      deleteAfterMs: settings.memoryDeleteAfterMs,
      logger: log,
      stateDir: settings.stateDir,
      contentCacheBytes: settings.memoryCacheBytes,
      wrapSync: (phase, sync) => this.#spans.sync(phase, sync),
    });
    this.#forward(this.#loop);
  }

  /**
   * End the memory, whatever got done before: with a sync loop, its finish (`clean`: final sync
   * first) bounded as above; with only a mount, the unmount. Then stop forwarding and release the
   * paths. Never throws; the report is undefined when there was no loop or it overran its bound.
   * Runs once: later calls return the first call's promise.
   */
  finish(clean: boolean): Promise<FinishReport | undefined> {
    this.#finished ??= this.#finish(clean);
    return this.#finished;
  }

  async #finish(clean: boolean): Promise<FinishReport | undefined> {
    let report: FinishReport | undefined;
    const loop = this.#loop;
    if (loop) {
      report = await this.#spans.finish(clean, () => boundedFinish(loop, clean, this.#o.settings.finalFlushMs, this.#log));
    } else if (this.#mounted) {
      await this.#mounted.unmount().catch((e: unknown) => this.#log.warn({ error: errorSummary(coerceError(e)) }, 'unmount failed'));
    }
    for (const detach of this.#detach.splice(0)) detach();
    if (this.#sessionFolder !== undefined) await removeSessionStoresFolder(this.#sessionFolder);
    this.#releasePaths();
    return report;
  }

  #forward(source: Parameters<typeof forwardMemoryEvents>[0]): void {
    const { metrics, emit, listens, workId, session } = this.#o;
    this.#detach.push(forwardMemoryEvents(source, metrics, emit, { workId, sessionId: session.id }, listens), this.#spans.observe(source));
  }
}

/** The session's memory store resources. */
export function storeResources(session: BetaManagedAgentsSession) {
  return session.resources.filter((r) => r.type === 'memory_store');
}

/**
 * Run the memory core's finish (it bounds itself by finalFlushMs and unmounts); if it has not
 * returned shortly after that bound, stop waiting so close() stays bounded.
 */
async function boundedFinish(loop: SyncLoopView, clean: boolean, finalFlushMs: number, log: Logger): Promise<FinishReport | undefined> {
  const guard = combineSignals([], finalFlushMs + FINISH_SLACK_MS);
  try {
    return await Promise.race([
      loop.finish({ clean, signal: guard.signal }),
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
