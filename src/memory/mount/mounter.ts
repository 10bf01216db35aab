import { EventEmitter, setMaxListeners } from 'node:events';
import * as path from 'node:path';
import type Anthropic from '@anthropic-ai/sdk';
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';
import pLimit, { type LimitFunction } from 'p-limit';
import { MemoryMountError, coerceError } from '../../errors.js';
import { abortReason, combineSignals, isAbortError } from '../../internal/abort.js';
import { monotonicClock, type Clock } from '../../internal/clock.js';
import { MEMORY_DEFAULTS, WORKER_DEFAULTS } from '../../internal/defaults.js';
import { childLogger, errorSummary, resolveLogger, snakeCaseKeys, type Logger } from '../../internal/logger.js';
import { LocalDir, LocalDirError } from '../disk/local-dir.js';
import { markerContent } from '../rules/marker.js';
import { adoptVerdict, type JournalFact } from '../rules/adopt.js';
import { checkParent, createRoot, inspectPath, probeCaseInsensitive, validateSpecs, type StoreSpec } from './mount-checks.js';
import { fromJournalState, Journal, type JournalEntry } from '../journal/journal.js';
import { MountedSession, MountedStore, type JournalBinding } from '../sync/mounted.js';
import { isInsideAllowedRoots, normalizeAllowedRoots } from './mount-path-guard.js';
import { checkOwner, currentOwner } from '../journal/owner.js';
import type { OwnerIdentity } from '../rules/owner-verdict.js';
import { groupCaseCollisions, relToRemotePath, remotePathToRel } from '../rules/paths.js';
import {
  dropContent,
  FULL_PAGE_LIMIT,
  malformed,
  RemoteStore,
  type ListedMemoryWithContent,
  type RemoteMemory,
} from '../remote/remote-store.js';
import type { PageContent } from '../remote/page-bytes.js';
import { fetchMisses, partOf, type Miss } from '../remote/cache-misses.js';
import { CONTENT_CACHE_DEFAULT_BYTES, ContentCache } from '../disk/content-cache.js';
import { PageBudget, PageGate } from '../remote/page-budget.js';
import { ByteBudget } from '../remote/byte-budget.js';
import { checkMemoryOptions, MEMORY_BUFFER_DEFAULT_BYTES } from '../sync/options.js';
import { safeEmit } from '../../internal/safe-emit.js';
import { defaultStateDir } from '../disk/state-dir.js';
import { StatCache, backdatedMtimeMs } from '../disk/stat-cache.js';
import { memoryConcurrency } from '../sync/options.js';
import { storeRoot } from './store-root.js';
import { SyncLoop } from '../sync/sync-loop.js';
import { createSyncState } from '../rules/sync-state.js';
import { setPathKey } from '../rules/path-record.js';
import { WriteQueue } from './write-queue.js';
import type { BaselineEntry, MemoryAccess, MemoryDeleteMode, MemoryEventMap } from '../rules/types.js';

export { MountedSession, MountedStore } from '../sync/mounted.js';
export { slug } from './store-root.js';

/** Default interval of the progress line of a mount still downloading. */
export const MOUNT_PROGRESS_INTERVAL_DEFAULT_MS = 5_000;

/**
 * Listing pages one mount has in flight, as a multiple of `concurrency`. A mount's listing is a
 * tree of short cursors (a depth-1 page per store, then each top-level folder on its own cursor), so
 * its wall is the number of round trips its pages take: 8 stores of 250 memories are 176 pages,
 * 11 waves at 16 in flight and 6 at 32. What the pages hold at once stays bounded in bytes by the
 * page budget and gate, whatever the fan-out.
 */
export const LISTING_FAN_OUT = 2;

/**
 * Writes queued per store, as a multiple of `concurrency`, past which the listing waits. The bytes
 * queued are bounded apart (the mount's write budget); this count bounds the small items a page of
 * small memories gives, and lets a run of writes find enough queued to make a whole batch.
 */
const WRITE_QUEUE_HIGH_WATER_FACTOR = 8;
/**
 * Files written (synchronously) between two yields to the event loop. Each batch checks every
 * folder chain it writes through twice (at its first write and at its end): with a store's
 * folders listed in parallel a batch writes through most of them, so fewer, larger batches cost
 * fewer checks. A batch holds the event loop a few milliseconds (its bytes are bounded by the
 * write budget).
 */
const WRITE_BATCH_FILES = 128;
/** Bytes of the per-store buffer a download is encoded into (grown for a larger memory). */
const SCRATCH_BYTES = 128 * 1024;

/**
 * One memory waiting to be written: what the baseline needs, and its downloaded content, or none
 * for a memory whose content is copied from the content cache.
 */
interface Download {
  /** `path` (the server's) only for a cached content: it is fetched by it when the cache fails. */
  m: { id: string; sha: string; updatedAt: string; path?: string; sizeBytes?: number };
  content: string | PageContent | undefined;
  rel: string;
}

/** A listed memory not written yet: with its content (full view), or without (basic view). */
type Listed = { m: RemoteMemory; rel: string; content?: string | PageContent };

/** What a listed content weighs in the mount's write budget: its bytes (a bound, for an escaped one). */
function contentWeight(content: string | PageContent | undefined): number {
  if (content === undefined) return 0;
  return typeof content === 'string' ? content.length : content.rawBytes;
}

export { MAX_STORES_PER_SESSION } from './mount-checks.js';

/** Default bound on a whole mount (every store's listing and download), in ms. */
const MOUNT_TIMEOUT_DEFAULT_MS = WORKER_DEFAULTS.mountTimeoutMs;

export interface MemoryMounterOptions {
  /** Client whose credential may read the session's stores (the work item's sessions token). */
  client: Anthropic;
  /** pino logger; default: warnings and errors to stderr. */
  logger?: Logger;
  /**
   * File writes (and content fetches, in the `retrieve` strategy) in flight per mount; listing
   * pages in flight per mount are twice this. Default 16.
   */
  concurrency?: number;
  /**
   * Where state outside the mounts lives (journal, conflict copies). Default
   * `$XDG_STATE_HOME/managed-agents-worker`, else `~/.local/state/managed-agents-worker`.
   */
  stateDir?: string;
  /** What a local deletion may do on the server while an adopted leftover is reconciled. Default `enabled`. */
  deletions?: MemoryDeleteMode;
  /** Least time a file must be gone before its memory is deleted (reconciling an adopted leftover). Default 30 000. */
  deleteAfterMs?: number;
  /** Aborts every mount in progress. */
  signal?: AbortSignal;
  /**
   * Base for stores attached without a `mount_path`: they go to `<workdir>/memory/<slug of name>`.
   * Default `process.cwd()`.
   */
  workdir?: string;
  /** Per-request timeout in ms. Default 60 000. */
  requestTimeoutMs?: number;
  /**
   * How contents are downloaded: `list-full` pages the full view (20 memories per request), one
   * cursor per top-level folder;
   * `retrieve` lists the basic view and fetches each memory (bounded by `concurrency`).
   * Default `list-full`, the faster of the two on the emulator for 8 × 250 memories.
   * @internal
   */
  downloadVia?: 'list-full' | 'retrieve';
  /** How often a mount still downloading logs its progress and emits `mountProgress`, in ms. Default 5 000. */
  progressIntervalMs?: number;
  /**
   * Folders a store may be mounted in: a mount path not strictly inside one of them is refused.
   * Default: empty, no restriction.
   */
  allowedMountRoots?: readonly string[];
  /** Milliseconds the whole mount (every store's download) may take before it fails. Default 300 000. */
  mountTimeoutMs?: number;
  /**
   * Bytes of memory content one mount holds at once, all its stores together: half for listing
   * pages in flight (asked for, read and not yet handed on), half for downloaded files waiting to
   * be written (let go as each is written). 1 MiB..1 GiB; default 4 MiB.
   */
  bufferBytes?: number;
  /**
   * Called at the start of each mount with its two byte budgets (tests watch them).
   * @internal
   */
  bufferProbe?: (budgets: { pages: ByteBudget; writes: ByteBudget }) => void;
  /**
   * Bytes of memory contents kept in `<stateDir>/content-cache/` (see {@link ContentCache}): a store
   * whose listing shows cached contents is listed in the basic view and copies them instead of
   * downloading them. Default 536 870 912 (512 MiB); `0` turns the cache off.
   */
  contentCacheBytes?: number;
  /** @internal */
  clock?: Clock;
  /**
   * Treat every filesystem as case-insensitive (lets tests exercise case folding on a case-sensitive host).
   * @internal
   */
  assumeCaseInsensitive?: boolean;
}

/** Runs the mount of one store given as `run` and returns what it returns. */
export type StoreWrapper = <T>(storeId: string, run: () => Promise<T>) => Promise<T>;

type MemoryStoreResource = Extract<BetaManagedAgentsSession['resources'][number], { type: 'memory_store' }>;

/**
 * Materialises a session's memory stores as folders.
 *
 * Rules:
 * - refuses, with a {@link MemoryMountError} naming the store, the path and the fix: more than 8
 *   stores, a mount path that is not clean and absolute, two stores on one path (or one inside
 *   another), a missing, non-folder or unwritable parent, and anything at all already at the path
 *   (a dangling symlink included), except a leftover of a crashed worker (see {@link adoptVerdict}),
 *   which is reconciled with the store and taken over. All checks run before anything is created;
 * - creates only each store's own folder (never a parent), writes the marker first, then
 *   downloads every memory; stores download in parallel, each file created directly under its
 *   name in that fresh folder, the writes queued behind the listing and bounded;
 * - a server path the folder cannot hold (refused by the path rules, or colliding by case on a
 *   case-insensitive filesystem) is left out with a warning and recorded in `state.shadowed`;
 * - a journal entry is written as soon as a folder exists, marked `downloading`, and again after
 *   the download without the mark: a crash during the download leaves a leftover the next mount of
 *   that store clears and downloads again (a file may be half written; none is an edit), a crash
 *   after it one that mount adopts;
 * - if any store fails, everything this mount created is removed before the error is thrown (an
 *   adopted leftover is never removed: it may hold the only copy of an edit).
 */
/** The folders of a session's stores, and those of them that are read-only. */
export interface StoreRoots {
  all: string[];
  readOnly: string[];
}

export class MemoryMounter extends EventEmitter<MemoryEventMap> {
  readonly #client: Anthropic;
  readonly #log: Logger;
  readonly #concurrency: number;
  readonly #signal: AbortSignal | undefined;
  readonly #workdir: string;
  readonly #timeoutMs: number;
  readonly #downloadVia: 'list-full' | 'retrieve';
  readonly #clock: Clock;
  readonly #assumeCaseInsensitive: boolean;
  /** Where each mounted store's sync state is journaled. */
  readonly #journal: Journal;
  readonly #stateDir: string;
  readonly #deletions: MemoryDeleteMode;
  readonly #deleteAfterMs: number | undefined;
  readonly #progressIntervalMs: number;
  readonly #allowedRoots: string[];
  readonly #mountTimeoutMs: number;
  readonly #bufferBytes: number;
  readonly #bufferProbe: MemoryMounterOptions['bufferProbe'];
  readonly #contents: ContentCache | undefined;
  #owner: Promise<OwnerIdentity> | undefined;

  constructor(opts: MemoryMounterOptions) {
    super();
    this.#client = opts.client;
    this.#log = resolveLogger(opts.logger).child({ component: 'memory-mounter' });
    this.#concurrency = memoryConcurrency(opts.concurrency);
    this.#signal = opts.signal;
    this.#workdir = opts.workdir ?? process.cwd();
    this.#timeoutMs = opts.requestTimeoutMs ?? MEMORY_DEFAULTS.requestTimeoutMs;
    this.#downloadVia = opts.downloadVia ?? 'list-full';
    this.#clock = opts.clock ?? monotonicClock;
    this.#assumeCaseInsensitive = opts.assumeCaseInsensitive ?? false;
    this.#stateDir = opts.stateDir ?? defaultStateDir();
    this.#journal = new Journal(this.#stateDir);
    this.#deletions = opts.deletions ?? 'enabled';
    this.#deleteAfterMs = opts.deleteAfterMs;
    this.#progressIntervalMs = Math.max(100, opts.progressIntervalMs ?? MOUNT_PROGRESS_INTERVAL_DEFAULT_MS);
    this.#allowedRoots = normalizeAllowedRoots(opts.allowedMountRoots ?? []);
    this.#mountTimeoutMs = opts.mountTimeoutMs ?? MOUNT_TIMEOUT_DEFAULT_MS;
    if (opts.bufferBytes !== undefined) checkMemoryOptions({ memoryBufferBytes: opts.bufferBytes }, 'MemoryMounter options');
    this.#bufferBytes = opts.bufferBytes ?? MEMORY_BUFFER_DEFAULT_BYTES;
    this.#bufferProbe = opts.bufferProbe;
    if (opts.contentCacheBytes !== undefined) checkMemoryOptions({ memoryCacheBytes: opts.contentCacheBytes }, 'MemoryMounter options');
    this.#contents = ContentCache.shared({
      stateDir: this.#stateDir,
      maxBytes: opts.contentCacheBytes ?? CONTENT_CACHE_DEFAULT_BYTES,
      logger: this.#log,
    });
  }

  /**
   * Mount every store of `session`. `wrapStore` runs the mount of each store (tracing wraps it in a
   * span); by default each runs as is. `onRoots` is called once, as soon as every store's folder
   * exists (before their contents are written), with the folders and those of them that are
   * read-only: what binds the folders (a sandbox) can start while the mount runs. A mount that fails
   * removes the folders it created, whether `onRoots` was called or not.
   *
   * `linkReadOnly`: the folders of read-only stores are bound read-only wherever an agent sees them
   * (each session's own copy in its sandbox), so nothing but this process ever writes in them: their
   * files found in the content cache are made hard links to its blobs (checked by a read first, as
   * a copy is) instead of copies, where the filesystem allows; elsewhere they are copied. Never set
   * it where an agent's tools can write in a read-only store's folder: a write through a link
   * would change the cached content every later mount copies.
   */
  async mount(
    session: BetaManagedAgentsSession,
    opts: {
      signal?: AbortSignal;
      workId?: string;
      wrapStore?: StoreWrapper;
      onRoots?: (roots: StoreRoots) => void;
      linkReadOnly?: boolean;
    } = {},
  ): Promise<MountedSession> {
    const wrapStore: StoreWrapper = opts.wrapStore ?? ((_storeId, run) => run());
    const log = childLogger(this.#log, { session_id: session.id });
    const resources = (session.resources ?? []).filter((r): r is MemoryStoreResource => r.type === 'memory_store');
    const specs = resources.map((r) => this.#specFor(r));
    validateSpecs(session.id, specs);
    for (const spec of specs) checkAllowedRoot(spec, this.#allowedRoots);
    await Promise.all(specs.map((s) => this.#checkPath(s)));
    this.#owner ??= currentOwner();
    const binding = { journal: this.#journal, sessionId: session.id, workId: opts.workId, owner: await this.#owner, clock: this.#clock };

    const deadline = mountDeadline(session.id, specs, this.#mountTimeoutMs);
    const { signal, dispose } = combineSignals([this.#signal, opts.signal, deadline.signal]);
    if (signal.aborted) {
      // An 'abort' listener added now would never fire: the mount would run to the end.
      dispose();
      deadline.clear();
      throw abortReason(signal);
    }
    const created: string[] = [];
    // Listing pages in flight across every store of this mount: the page bodies held at once stay
    // bounded whatever the number of stores (and in bytes by the page budget and gate below).
    const pages = pLimit(LISTING_FAN_OUT * this.#concurrency);
    const budget = new PageBudget(pages, FULL_PAGE_LIMIT);
    // Content held at once, in bytes, whatever the memories weigh: pages in flight, files queued.
    const buffers = { pages: new ByteBudget(this.#bufferBytes / 2), writes: new ByteBudget(this.#bufferBytes / 2) };
    this.#bufferProbe?.(buffers);
    const gate = new PageGate(buffers.pages);
    let rootsToCome = specs.length;
    const rootExists = (): void => {
      if (--rootsToCome > 0 || opts.onRoots === undefined) return;
      opts.onRoots({ all: specs.map((s) => s.root), readOnly: specs.filter((s) => s.access === 'read_only').map((s) => s.root) });
    };
    const ctrl = new AbortController();
    // Every request in flight listens on this one signal.
    setMaxListeners(10_000, ctrl.signal);
    const onAbort = (): void => ctrl.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      // The content cache writes what this mount downloads once the mount is done.
      const hold = <T>(run: () => Promise<T>): Promise<T> => (this.#contents !== undefined ? this.#contents.holding(run) : run());
      const settled = await hold(() =>
        Promise.allSettled(
          specs.map(async (spec) => {
            try {
              return await wrapStore(spec.storeId, () =>
                spec.adopt !== undefined
                  ? (rootExists(), this.#adoptOne(spec, spec.adopt, binding, ctrl.signal, log))
                  : this.#mountOne(
                      spec,
                      created,
                      binding,
                      ctrl.signal,
                      log,
                      { pages, budget, gate, writes: buffers.writes },
                      rootExists,
                      opts.linkReadOnly === true && spec.access === 'read_only',
                    ),
              );
            } catch (e) {
              ctrl.abort(e);
              throw e;
            }
          }),
        ),
      );
      const failure = firstRealFailure(settled, ctrl.signal);
      if (failure !== undefined) {
        await removeAll(created, this.#journal, log);
        await this.#contents?.flush();
        // Leftovers adopted by the stores that did mount are handed back, never removed.
        for (const r of settled) if (r.status === 'fulfilled' && !created.includes(r.value.root)) await r.value.release();
        throw deadline.signal.aborted ? deadline.signal.reason : failure;
      }
      const stores: MountedStore[] = [];
      for (const r of settled) if (r.status === 'fulfilled') stores.push(r.value);
      const contents = this.#contents;
      return new MountedSession(
        session.id,
        stores,
        (payload) => safeEmit(this, log, 'unmounted', payload),
        async () => contents?.flush(),
      );
    } finally {
      signal.removeEventListener('abort', onAbort);
      dispose();
      deadline.clear();
    }
  }

  /**
   * Send the deletions the previous session of this store confirmed but could not send, before the
   * download: each with the sha the memory held then as precondition (a memory changed since is
   * kept and downloaded). One that fails for a transient reason stays carried for the next mount.
   */
  async #sendCarriedDeletes(spec: StoreSpec, remote: RemoteStore, signal: AbortSignal, log: Logger): Promise<void> {
    if (this.#deletions !== 'enabled' || spec.access !== 'read_write') return;
    const carried = await this.#journal.carriedDeletes(spec.storeId);
    const entries = Object.entries(carried);
    if (entries.length === 0) return;
    const remaining: typeof carried = {};
    for (const [rel, d] of entries) {
      const r = await remote.delete(d.id, d.sha, signal);
      if (r.ok) {
        log.info({ path: rel }, 'memory deleted in the store: a deletion the previous session of this store confirmed but could not send');
        safeEmit(this, log, 'deleted', { storeId: spec.storeId, path: rel, side: 'remote' });
      } else if (r.failure === 'precondition') {
        log.warn(
          { path: rel },
          'a deletion carried from the previous session was not sent: the memory changed in the store since; it is kept',
        );
      } else {
        setPathKey(remaining, rel, d);
        log.warn(
          { path: rel, reason: r.reason },
          'a deletion carried from the previous session failed; the next mount of this store retries it',
        );
      }
    }
    await this.#journal.settleCarried(spec.storeId, remaining);
  }

  #specFor(r: MemoryStoreResource): StoreSpec {
    const name = r.name || r.memory_store_id;
    const access: MemoryAccess = r.access === 'read_only' ? 'read_only' : 'read_write';
    return { storeId: r.memory_store_id, name, access, root: storeRoot(r, this.#workdir) };
  }

  /**
   * The host checks before anything is created: the parent, and what is at the path already.
   * A leftover this mount may adopt is recorded on the spec; anything else there is refused.
   */
  async #checkPath(spec: StoreSpec): Promise<void> {
    await checkParent(spec);
    const found = await inspectPath(spec.root, spec.storeId);
    if (found.kind === 'nothing') return;
    let journal: JournalFact = { kind: 'none' };
    let entry: JournalEntry | undefined;
    if (found.kind === 'folder') {
      const read = await this.#journal.read(spec.root);
      if (read === undefined) journal = { kind: 'none' };
      else if ('error' in read) journal = { kind: 'unreadable', error: read.error };
      else {
        entry = read;
        journal = {
          kind: 'entry',
          storeId: read.storeId,
          owner: await checkOwner(read.owner),
          unmounting: read.unmounting === true,
          downloading: read.downloading === true,
        };
      }
    }
    const verdict = adoptVerdict(spec.storeId, found, journal);
    if (verdict.action === 'adopt' && entry !== undefined) {
      spec.adopt = entry;
      return;
    }
    if (verdict.action === 'clear') {
      this.#log.info(
        { root: spec.root, memory_store_id: spec.storeId, reason: verdict.reason },
        'removing a leftover folder with nothing to save before mounting',
      );
      await new LocalDir(spec.root).removeRoot();
      await this.#journal.remove(spec.root);
      return;
    }
    const reason = verdict.action === 'refuse' ? verdict.reason : 'something is there';
    const recoverable = verdict.action === 'refuse' && verdict.recoverable;
    throw new MemoryMountError(
      `memory store ${spec.storeId} (${spec.name}): ${spec.root} already exists: ${reason}. The worker never mounts over ` +
        (recoverable
          ? 'a folder another running worker owns. Stop that worker (its leftover is then adopted by the next mount of this store, ' +
            'or run `managed-agents-worker recover`), or attach the store at another mount_path.'
          : 'data it does not own. Remove it (after saving anything you need) or attach the store at another mount_path.'),
      { storeId: spec.storeId, path: spec.root },
    );
  }

  /**
   * Take over a leftover of a crashed worker: bind it to this session (the journal entry now names
   * this process), then reconcile it with the store by the usual rules, starting from the
   * journal's baseline. After that it is mounted like any other folder.
   */
  async #adoptOne(
    spec: StoreSpec,
    entry: JournalEntry,
    binding: JournalBinding,
    signal: AbortSignal,
    sessionLog: Logger,
  ): Promise<MountedStore> {
    const started = this.#clock.now();
    const log = sessionLog.child({ memory_store_id: spec.storeId });
    const dir = new LocalDir(spec.root);
    const caseInsensitive = this.#assumeCaseInsensitive || (await probeCaseInsensitive(spec.root));
    const state = { ...fromJournalState(entry.state, this.#clock.now()), access: spec.access, root: spec.root };
    const store = new MountedStore({
      storeId: spec.storeId,
      name: spec.name,
      root: spec.root,
      access: spec.access,
      memories: Object.keys(state.baseline).length,
      dir,
      cache: new StatCache(),
      caseInsensitive,
      log,
      state,
      journal: binding,
    });
    await store.writeJournal();
    log.warn(
      { root: spec.root, previous_session: entry.sessionId, previous_owner_pid: entry.owner.pid },
      'adopting the leftover folder of a worker that is gone; reconciling it with the store',
    );
    const loop = new SyncLoop({
      client: this.#client,
      mounted: new MountedSession(binding.sessionId, [store], () => {}),
      logger: log,
      stateDir: this.#stateDir,
      clock: this.#clock,
      deletions: this.#deletions,
      ...(this.#deleteAfterMs !== undefined ? { deleteAfterMs: this.#deleteAfterMs } : {}),
      requestTimeoutMs: this.#timeoutMs,
      concurrency: this.#concurrency,
    });
    const forward =
      <K extends keyof MemoryEventMap>(name: K) =>
      (...args: MemoryEventMap[K]) =>
        safeEmit(this, log, name, ...args);
    for (const name of ['uploaded', 'downloaded', 'conflict', 'deleted', 'refused'] as const) loop.on(name, forward(name) as never);
    let report;
    try {
      report = await loop.syncNow({ signal });
    } catch (e) {
      // Not adopted after all: hand the leftover back, so the next mount may try again.
      await store.release();
      throw e;
    }
    const memories = Object.keys(store.state.baseline).length;
    const durationMs = this.#clock.now() - started;
    log.info(
      { root: spec.root, memories, ...snakeCaseKeys(report), duration_ms: durationMs },
      'leftover folder adopted and reconciled; memory store mounted',
    );
    safeEmit(this, log, 'mounted', { storeId: spec.storeId, root: spec.root, memories, bytes: 0, durationMs });
    return store;
  }

  async #mountOne(
    spec: StoreSpec,
    created: string[],
    binding: JournalBinding,
    signal: AbortSignal,
    sessionLog: Logger,
    buffers: { pages: LimitFunction; budget: PageBudget; gate: PageGate; writes: ByteBudget },
    rootExists: () => void,
    linkCached: boolean,
  ): Promise<MountedStore> {
    const { pages, budget, gate } = buffers;
    const started = this.#clock.now();
    const log = sessionLog.child({ memory_store_id: spec.storeId });
    await createRoot(spec);
    created.push(spec.root);
    rootExists();
    const dir = new LocalDir(spec.root);
    const cache = new StatCache();
    // The journal entry exists from the moment the folder does, marked "downloading" until every
    // file is written: files are created straight under their names, so a crash mid-download may
    // leave one half written. The next mount of this store clears such a leftover and downloads it
    // again; nothing in it can be an edit, since the session starts only after the mount.
    const early = new MountedStore({
      storeId: spec.storeId,
      name: spec.name,
      root: spec.root,
      access: spec.access,
      memories: 0,
      dir,
      cache,
      caseInsensitive: false,
      log,
      state: createSyncState({ storeId: spec.storeId, root: spec.root, access: spec.access }),
      journal: binding,
    });
    await early.writeJournal({ downloading: true }).catch((e: unknown) => {
      throw new MemoryMountError(
        `memory store ${spec.storeId} (${spec.name}): could not write its journal entry in ${this.#stateDir}: ${coerceError(e).message}. ` +
          'Without it a crash would lose unsynced edits; fix the state folder (stateDir / --state-dir) and retry.',
        { storeId: spec.storeId, path: spec.root },
        { cause: e },
      );
    });
    const caseInsensitive = this.#assumeCaseInsensitive || (await probeCaseInsensitive(spec.root));
    if (caseInsensitive) {
      log.warn(
        { root: spec.root },
        'this filesystem ignores letter case: memory paths differing only by case are kept once, the others not synced',
      );
    }
    await dir.writeMarker(markerContent(spec.storeId));

    const baseline: Record<string, BaselineEntry> = {};
    const shadowed: Record<string, { reason: string }> = {};
    const remote = new RemoteStore(this.#client, spec.storeId, { requestTimeoutMs: this.#timeoutMs });
    await this.#sendCarriedDeletes(spec, remote, signal, log);
    const limit = pLimit(this.#concurrency);
    const writer = dir.freshWriter();
    let bytesWritten = 0;

    const shadow = (p: string, reason: string): void => {
      setPathKey(shadowed, p, { reason });
      log.warn({ path: p, reason }, 'memory not materialised; it is never synced from this folder');
    };
    // One buffer per store holds the bytes of the file being written (the queue writes one file at
    // a time): a download allocates nothing outside the JavaScript heap per file.
    let scratch = Buffer.allocUnsafeSlow(SCRATCH_BYTES);
    const contents = this.#contents;
    // Listed as cached, but the cache could not give them when their turn came: fetched after.
    const lateMisses: Miss[] = [];
    let copied = 0;
    let linked = 0;
    // Synchronous: the queue writes a run of files without a promise or a microtask per file.
    const write = ({ m, content, rel }: Download): void => {
      if (signal.aborted) {
        dropContent(content);
        return;
      }
      if (content === undefined) {
        // Read and hashed now: only bytes that hash to the listed sha are written. Into the
        // store's buffer when it is large enough, as a download is.
        const readAtNs = cache.nowNs();
        const cached = contents?.read(m.sha, log, scratch);
        if (cached === undefined) {
          lateMisses.push({
            m: { id: m.id, path: m.path ?? relToRemotePath(rel), sha: m.sha, sizeBytes: m.sizeBytes ?? 0, updatedAt: m.updatedAt },
            rel,
          });
          return;
        }
        if (!linkCached || !link(m, rel, cached.length, readAtNs)) place(m, rel, cached, false);
      } else if (typeof content === 'string') {
        // A UTF-16 unit takes at most 3 UTF-8 bytes: only a content that may not fit is measured.
        if (content.length * 3 > scratch.length) {
          const size = Buffer.byteLength(content, 'utf8');
          if (size > scratch.length) scratch = Buffer.allocUnsafeSlow(size);
        }
        place(m, rel, scratch.subarray(0, scratch.write(content, 0, 'utf8')), true);
      } else {
        // The page's own bytes (decoded in place): used before this returns.
        try {
          content.withBytes((bytes) => place(m, rel, bytes, true));
        } catch (e) {
          if (!(e instanceof SyntaxError)) throw e;
          throw malformed(
            spec.storeId,
            `the full listing of memory store ${spec.storeId}: the content listed for ${JSON.stringify(rel)} (memory ${m.id}) is not a JSON string`,
          );
        }
      }
    };
    const place = (m: Download['m'], rel: string, bytes: Buffer, downloaded: boolean): void => {
      try {
        const mtimeMs = backdatedMtimeMs(m.updatedAt);
        writer.writeNow(rel, bytes, mtimeMs);
        // The file holds the content the listing gave under this sha: it is noted under it, not
        // hashed again on the mount's path (a sync compares the file with the baseline by that sha,
        // and any later change of the file changes its stat; the first sync's stat is checked
        // against this write, see StatCache.expect). A cached content was hashed as it was read; a
        // downloaded one is hashed by the cache before it keeps it, after the mount.
        if (!downloaded) copied++;
        else contents?.put(m.sha, bytes);
        cache.expect(rel, bytes.length, mtimeMs, m.sha, true);
        setPathKey(baseline, rel, { id: m.id, sha: m.sha });
        bytesWritten += bytes.length;
        safeEmit(this, log, 'downloaded', { storeId: spec.storeId, path: rel, sha: m.sha });
      } catch (e) {
        if (e instanceof LocalDirError || isUnholdableName(e)) {
          shadow(rel, `this filesystem cannot hold ${JSON.stringify(rel)}: ${coerceError(e).message}`);
          return;
        }
        throw e;
      }
    };
    /**
     * A read-only store's cached content as a hard link to the cache's blob (just read and hashed):
     * noted in the stat cache with the link's own stat (its mtime is the blob's, not the memory's),
     * hashed at the read. False when no link was made: the caller writes the bytes.
     */
    const link = (m: Download['m'], rel: string, size: number, readAtNs: bigint): boolean => {
      const source = contents?.blobFile(m.sha);
      const st = source === undefined ? undefined : writer.linkNow(rel, source);
      if (st === undefined || st.size !== BigInt(size)) return false;
      cache.record(rel, st, m.sha, true, readAtNs);
      copied++;
      linked++;
      setPathKey(baseline, rel, { id: m.id, sha: m.sha });
      safeEmit(this, log, 'downloaded', { storeId: spec.storeId, path: rel, sha: m.sha });
      return true;
    };
    // Written behind the listing; with this many downloads queued the listing waits, so downloaded
    // contents held in memory stay bounded however fast pages arrive.
    // Each batch checks a folder chain at its first write and again at its end (see FreshFileWriter).
    const queue = new WriteQueue(write, {
      highWater: WRITE_QUEUE_HIGH_WATER_FACTOR * this.#concurrency,
      batch: WRITE_BATCH_FILES,
      hooks: {
        begin: () => writer.beginBatch(),
        end: (failed) => {
          // The batch's files get their bound for the stat cache: the last one's ctime, read back.
          cache.settleWritten(failed ? undefined : writer.lastWrittenCtimeNs());
          writer.endBatchNow({ check: !failed });
        },
      },
      // Every store's queue counts in the mount's one write budget (content characters).
      // A content copied from the cache is read at its turn, so it holds nothing while queued.
      bytes: { budget: buffers.writes, sizeOf: (d) => contentWeight(d.content) },
    });

    const pending: Listed[] = [];
    // Memories listed without content and not cached, and the memories listed per top-level part.
    const misses: Miss[] = [];
    const partSizes = new Map<string, number>();
    const schedule = ({ m, rel, content }: Listed): Promise<void> | undefined => {
      if (content === undefined && contents?.has(m.sha) !== true) {
        misses.push({ m, rel });
        return undefined;
      }
      // Only the content waits in the queue, not the listed item: the page can be collected.
      if (content !== undefined) return queue.push({ m: { id: m.id, sha: m.sha, updatedAt: m.updatedAt }, content, rel });
      return queue.push({ m: { id: m.id, sha: m.sha, updatedAt: m.updatedAt, path: m.path, sizeBytes: m.sizeBytes }, content, rel });
    };
    const accept = (m: RemoteMemory, content: string | PageContent | undefined): Promise<void> | undefined => {
      if (content !== undefined) budget.saw(contentWeight(content));
      const check = remotePathToRel(m.path);
      if (!check.ok) {
        dropContent(content);
        shadow(m.path, check.reason);
        return;
      }
      const listed: Listed = content === undefined ? { m, rel: check.rel } : { m, rel: check.rel, content };
      if (caseInsensitive) pending.push(listed);
      else return schedule(listed);
      return undefined;
    };
    const acceptFull = (m: ListedMemoryWithContent): Promise<void> | undefined => accept(m, m.content);
    const acceptBasic = (m: RemoteMemory): Promise<void> | undefined => {
      const part = partOf(m.path);
      partSizes.set(part, (partSizes.get(part) ?? 0) + 1);
      return accept(m, undefined);
    };
    const fetched = (m: ListedMemoryWithContent, rel: string): Promise<void> | undefined => {
      budget.saw(contentWeight(m.content));
      return queue.push({ m: { id: m.id, sha: m.sha, updatedAt: m.updatedAt }, content: m.content, rel });
    };
    const refused = (m: RemoteMemory, reason: string): void => shadow(m.path, reason);

    // A long download says how far it got every few seconds, so a slow mount is not a silent one.
    const progress = setInterval(() => {
      const memories = Object.keys(baseline).length;
      const elapsedMs = this.#clock.now() - started;
      log.info({ root: spec.root, memories, elapsed_ms: elapsedMs }, 'memory store still downloading');
      safeEmit(this, log, 'mountProgress', { storeId: spec.storeId, root: spec.root, memories, elapsedMs });
    }, this.#progressIntervalMs);
    progress.unref();
    try {
      if (this.#downloadVia === 'retrieve') {
        const listed = await remote.listBasic(signal);
        await Promise.all(
          listed.map((item) =>
            limit(async () => {
              if (signal.aborted) return;
              await acceptFull(await remote.retrieve(item.id, signal));
            }),
          ),
        );
      } else {
        // With contents cached, the store is listed in the basic view when its first page shows at
        // least one cached content in two; else (or with nothing cached) as a cold store is. Basic
        // pages carry no content and stay out of the byte gate (their weight would skew its guess
        // of a full page); what the misses fetch goes through it.
        const warm =
          contents !== undefined &&
          (await contents.open()) &&
          contents.count > 0 &&
          (await remote.listBasicSplit(signal, acceptBasic, refused, {
            pages,
            decide: (shas) => 2 * shas.filter((sha) => contents.has(sha)).length >= shas.length,
          }));
        if (!warm) await remote.listFull(signal, acceptFull, refused, { parallel: this.#concurrency, pages, gate });
      }
      if (caseInsensitive) {
        const groups = groupCaseCollisions(pending.map((p) => p.rel));
        const kept = new Set(groups.kept);
        for (const s of groups.shadowed) shadow(s.path, s.reason);
        for (const p of pending) {
          if (kept.has(p.rel)) await schedule(p);
          else dropContent(p.content);
        }
      }
      if (misses.length > 0) await fetchMisses({ remote, misses, partSizes, signal, limit, gate, onContent: fetched, onRefused: refused });
      await queue.drained();
      if (lateMisses.length > 0) {
        await fetchMisses({ remote, misses: lateMisses.splice(0), signal, limit, gate, onContent: fetched, onRefused: refused });
        await queue.drained();
      }
    } catch (e) {
      // Let the write in flight finish before the caller removes the folder.
      queue.stop();
      await queue.settled();
      throw toMountError(spec, e, signal);
    } finally {
      clearInterval(progress);
      await writer.close();
    }
    if (signal.aborted) throw toMountError(spec, signal.reason, signal);

    const memories = Object.keys(baseline).length;
    const state = createSyncState({ storeId: spec.storeId, root: spec.root, access: spec.access, baseline, shadowed });
    const store = new MountedStore({
      storeId: spec.storeId,
      name: spec.name,
      root: spec.root,
      access: spec.access,
      memories,
      dir,
      cache,
      caseInsensitive,
      log,
      state,
      journal: binding,
    });
    await store.writeJournal();
    const durationMs = this.#clock.now() - started;
    log.info(
      { root: spec.root, memories, from_cache: copied, linked_from_cache: linked, bytes: bytesWritten, duration_ms: durationMs },
      'memory store mounted',
    );
    safeEmit(this, log, 'mounted', { storeId: spec.storeId, root: spec.root, memories, bytes: bytesWritten, durationMs });
    return store;
  }
}

/** Refuse a store outside every allowed mount root (when some are configured). */
function checkAllowedRoot(spec: StoreSpec, roots: readonly string[]): void {
  if (isInsideAllowedRoots(spec.root, roots)) return;
  throw new MemoryMountError(
    `memory store ${spec.storeId} (${spec.name}): mount path ${spec.root} is outside the allowed mount roots ` +
      `(${roots.join(', ')}); nothing was created. Attach the store at a mount_path inside one of them, or add its ` +
      `parent to allowedMountRoots (--allowed-mount-root ${path.dirname(spec.root)}).`,
    { storeId: spec.storeId, path: spec.root },
  );
}

/** A timer that aborts the mount with a clear error once `timeoutMs` has passed. */
function mountDeadline(sessionId: string, specs: StoreSpec[], timeoutMs: number): { signal: AbortSignal; clear(): void } {
  const ctrl = new AbortController();
  const timer = setTimeout(() => {
    const first = specs[0];
    ctrl.abort(
      new MemoryMountError(
        `session ${sessionId}: mounting its memory stores (${specs.map((s) => s.storeId).join(', ')}) did not finish within ` +
          `${timeoutMs} ms; the folders it created were removed and the work item fails. Check the API's latency and the ` +
          'size of the stores, or raise mountTimeoutMs.',
        { storeId: first?.storeId, path: first?.root },
      ),
    );
  }, timeoutMs);
  timer.unref?.();
  return { signal: ctrl.signal, clear: () => clearTimeout(timer) };
}

function toMountError(spec: StoreSpec, e: unknown, signal: AbortSignal): Error {
  if (e instanceof MemoryMountError) return e;
  const err = coerceError(e);
  if (signal.aborted && isAbortError(err)) return err;
  return new MemoryMountError(
    `memory store ${spec.storeId} (${spec.name}): downloading into ${spec.root} failed: ${err.message}. ` +
      'The folders this session created were removed; the work item can be retried.',
    { storeId: spec.storeId, path: spec.root },
    { cause: e },
  );
}

function firstRealFailure(settled: PromiseSettledResult<unknown>[], signal: AbortSignal): unknown {
  const failures = settled.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason);
  if (failures.length === 0) return undefined;
  // The first store to fail aborted its siblings: report its error, not their aborts.
  if (signal.aborted && failures.includes(signal.reason)) return signal.reason;
  return failures.find((f) => !isAbortError(f)) ?? failures[0];
}

async function removeAll(roots: string[], journal: Journal, log: Logger): Promise<void> {
  await Promise.all(
    roots.map(async (root) => {
      try {
        await new LocalDir(root).removeRoot();
        await journal.remove(root);
      } catch (err) {
        log.warn({ root, error: errorSummary(err) }, 'could not remove a folder this failed mount created; remove it by hand');
      }
    }),
  );
}

function isUnholdableName(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENAMETOOLONG' || code === 'EILSEQ' || code === 'EINVAL';
}
