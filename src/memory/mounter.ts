import { EventEmitter, setMaxListeners } from 'node:events';
import { constants as fsc } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type Anthropic from '@anthropic-ai/sdk';
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';
import pLimit, { type LimitFunction } from 'p-limit';
import { MemoryMountError, coerceError } from '../errors.js';
import { abortReason, combineSignals, isAbortError } from '../internal/abort.js';
import { monotonicClock, type Clock } from '../internal/clock.js';
import { resolveLogger, type Logger } from '../internal/logger.js';
import { backdatedMtimeMs } from './executor.js';
import { LocalDir, LocalDirError } from './local-dir.js';
import { sha256Hex } from './local-scan.js';
import { isValidMarker, markerContent } from './marker.js';
import { attachRuntime, type SessionRuntime, type StoreRuntime } from './mount-runtime.js';
import type { MountedSession, MountedStore } from './mounted.js';
import { listFullByFolder, MAX_LISTED_MEMORIES } from './parallel-listing.js';
import { checkMountPath, groupCaseCollisions, remotePathToRel } from './paths.js';
import { RemoteStore, type RemoteMemoryWithContent } from './remote-store.js';
import { safeEmit } from './safe-emit.js';
import { StatCache } from './stat-cache.js';
import { createSyncState } from './sync-state.js';
import type { BaselineEntry, MemoryAccess, MemoryEventMap } from './types.js';

export type { MountedSession, MountedStore } from './mounted.js';

/** Writes queued per mount, as a multiple of `concurrency`, past which the listing waits. */
const WRITE_QUEUE_HIGH_WATER_FACTOR = 4;

/** Most memory stores one session may attach (M1). */
export const MAX_STORES_PER_SESSION = 8;

export interface MemoryMounterOptions {
  /** Client whose credential may read the session's stores (the work item's sessions token). */
  client: Anthropic;
  /** pino logger; default: warnings and errors to stderr. */
  logger?: Logger;
  /** File writes (and content fetches, in the `retrieve` strategy) in flight per mount. Default 16. */
  concurrency?: number;
  /** Where state outside the mounts lives (conflict copies). Default `<os.tmpdir()>/managed-agents-worker`. */
  stateDir?: string;
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
  /** @internal */
  clock?: Clock;
  /**
   * Treat every filesystem as case-insensitive (tests exercise M3 on a case-sensitive host).
   * @internal
   */
  assumeCaseInsensitive?: boolean;
}

type MemoryStoreResource = Extract<BetaManagedAgentsSession['resources'][number], { type: 'memory_store' }>;

interface StoreSpec {
  storeId: string;
  name: string;
  access: MemoryAccess;
  root: string;
}

/**
 * Materialises a session's memory stores as folders (M2, M5, X5).
 *
 * Rules:
 * - refuses, with a {@link MemoryMountError} naming the store, the path and the fix: more than 8
 *   stores, a mount path that is not clean and absolute, two stores on one path (or one inside
 *   another), a missing, non-folder or unwritable parent, and anything at all already at the path
 *   (a dangling symlink included). All checks run before anything is created;
 * - creates only each store's own folder (never a parent), writes the marker first, then
 *   downloads every memory; stores download in parallel, writes are atomic and bounded;
 * - a server path the folder cannot hold (refused by the path rules, or colliding by case on a
 *   case-insensitive filesystem) is left out with a warning and recorded in `state.shadowed`;
 * - if any store fails, everything this mount created is removed before the error is thrown.
 */
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
  /** Listing pages in flight across all stores of this mounter's mounts. */
  readonly #listLimit: LimitFunction;

  constructor(opts: MemoryMounterOptions) {
    super();
    this.#client = opts.client;
    this.#log = resolveLogger(opts.logger).child({ component: 'memory-mounter' });
    this.#concurrency = Math.max(1, Math.floor(opts.concurrency ?? 16));
    this.#signal = opts.signal;
    this.#workdir = opts.workdir ?? process.cwd();
    this.#timeoutMs = opts.requestTimeoutMs ?? 60_000;
    this.#downloadVia = opts.downloadVia ?? 'list-full';
    this.#clock = opts.clock ?? monotonicClock;
    this.#assumeCaseInsensitive = opts.assumeCaseInsensitive ?? false;
    this.#listLimit = pLimit(this.#concurrency);
  }

  async mount(session: BetaManagedAgentsSession, opts: { signal?: AbortSignal } = {}): Promise<MountedSession> {
    const log = this.#log.child({ sessionId: session.id });
    const resources = (session.resources ?? []).filter((r): r is MemoryStoreResource => r.type === 'memory_store');
    const specs = resources.map((r) => this.#specFor(r));
    validateSpecs(session.id, specs);
    await Promise.all(specs.map((s) => checkHost(s)));

    const { signal, dispose } = combineSignals([this.#signal, opts.signal]);
    if (signal.aborted) {
      // An 'abort' listener added now would never fire: the mount would run to the end.
      dispose();
      throw abortReason(signal);
    }
    const created: string[] = [];
    const runtimes = new Map<MountedStore, StoreRuntime>();
    const ctrl = new AbortController();
    // Every request in flight listens on this one signal.
    setMaxListeners(10_000, ctrl.signal);
    const onAbort = (): void => ctrl.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const settled = await Promise.allSettled(
        specs.map(async (spec) => {
          try {
            return await this.#mountOne(spec, created, ctrl.signal, log);
          } catch (e) {
            ctrl.abort(e);
            throw e;
          }
        }),
      );
      const failure = firstRealFailure(settled, ctrl.signal);
      if (failure !== undefined) {
        await removeAll(created, log);
        throw failure;
      }
      const stores: MountedStore[] = [];
      for (const r of settled) {
        if (r.status === 'fulfilled') {
          stores.push(r.value.store);
          runtimes.set(r.value.store, r.value.runtime);
        }
      }
      return this.#handle(session.id, stores, runtimes, log);
    } finally {
      signal.removeEventListener('abort', onAbort);
      dispose();
    }
  }

  #specFor(r: MemoryStoreResource): StoreSpec {
    const name = r.name || r.memory_store_id;
    const access: MemoryAccess = r.access === 'read_only' ? 'read_only' : 'read_write';
    let root: string;
    if (r.mount_path) {
      const check = checkMountPath(r.mount_path);
      if (!check.ok) {
        throw new MemoryMountError(
          `memory store ${r.memory_store_id} (${name}): ${check.reason}; the worker mounts only clean absolute paths ` +
            '(no "..", ".", empty segments, NUL or control characters). Attach the store at a clean absolute mount_path.',
          { storeId: r.memory_store_id, path: r.mount_path },
        );
      }
      root = check.path;
    } else {
      root = path.join(path.resolve(this.#workdir), 'memory', slug(name) || slug(r.memory_store_id) || 'store');
    }
    return { storeId: r.memory_store_id, name, access, root };
  }

  async #mountOne(
    spec: StoreSpec,
    created: string[],
    signal: AbortSignal,
    sessionLog: Logger,
  ): Promise<{ store: MountedStore; runtime: StoreRuntime }> {
    const started = this.#clock.now();
    const log = sessionLog.child({ memory_store_id: spec.storeId });
    await createRoot(spec);
    created.push(spec.root);
    const dir = new LocalDir(spec.root);
    const caseInsensitive = this.#assumeCaseInsensitive || (await probeCaseInsensitive(spec.root));
    if (caseInsensitive) {
      log.warn({ root: spec.root }, 'this filesystem ignores letter case: memory paths differing only by case are kept once, the others not synced');
    }
    await dir.writeMarker(markerContent(spec.storeId));

    const cache = new StatCache();
    const baseline: Record<string, BaselineEntry> = {};
    const shadowed: Record<string, { reason: string }> = {};
    const remote = new RemoteStore(this.#client, spec.storeId, { requestTimeoutMs: this.#timeoutMs });
    const limit = pLimit(this.#concurrency);
    const writes: Promise<void>[] = [];

    const shadow = (p: string, reason: string): void => {
      shadowed[p] = { reason };
      log.warn({ path: p, reason }, 'memory not materialised; it is never synced from this folder');
    };
    const write = async (m: Omit<RemoteMemoryWithContent, 'content'>, bytes: Buffer, rel: string): Promise<void> => {
      if (signal.aborted) return;
      try {
        const st = await dir.writeFileAtomic(rel, bytes, { mtimeMs: backdatedMtimeMs(m.updatedAt), freshTree: true });
        const sha = sha256Hex(bytes);
        cache.record(rel, st, sha, true, cache.nowNs());
        if (sha !== m.sha) {
          log.warn({ path: rel, listedSha: m.sha, writtenSha: sha }, 'downloaded content does not hash to the listed content_sha256');
        }
        baseline[rel] = { id: m.id, sha: m.sha };
        safeEmit(this, log, 'downloaded', { storeId: spec.storeId, path: rel, sha: m.sha });
      } catch (e) {
        if (e instanceof LocalDirError || isUnholdableName(e)) {
          shadow(rel, `this filesystem cannot hold ${JSON.stringify(rel)}: ${coerceError(e).message}`);
          return;
        }
        throw e;
      }
    };

    const pending: Array<{ m: RemoteMemoryWithContent; rel: string }> = [];
    const schedule = (m: RemoteMemoryWithContent, rel: string): Promise<void> | undefined => {
      // Only the bytes wait in the queue, not the listed page's string: the page can be collected.
      const bytes = Buffer.from(m.content, 'utf8');
      const meta = { id: m.id, path: m.path, sha: m.sha, sizeBytes: m.sizeBytes, updatedAt: m.updatedAt };
      const p = limit(() => write(meta, bytes, rel));
      // Observed at once (so a failure during the listing is never an unhandled rejection) and
      // again by Promise.all below, which reports it.
      const settled = p.catch(() => {});
      writes.push(p);
      // With this many writes queued the listing waits for this one: downloaded contents held in
      // memory stay bounded however fast pages arrive.
      return limit.pendingCount >= WRITE_QUEUE_HIGH_WATER_FACTOR * this.#concurrency ? settled : undefined;
    };
    const accept = (m: RemoteMemoryWithContent): Promise<void> | undefined => {
      const check = remotePathToRel(m.path);
      if (!check.ok) {
        shadow(m.path, check.reason);
        return;
      }
      if (caseInsensitive) pending.push({ m, rel: check.rel });
      else return schedule(m, check.rel);
      return undefined;
    };

    try {
      if (this.#downloadVia === 'retrieve') {
        const listed = await remote.listBasic(signal);
        await Promise.all(
          listed.map((item) =>
            limit(async () => {
              if (signal.aborted) return;
              await accept(await remote.retrieve(item.id, signal));
            }),
          ),
        );
      } else {
        const listing = { storeId: spec.storeId, signal, limit: this.#listLimit, maxMemories: MAX_LISTED_MEMORIES, readRetries: 2, requestTimeoutMs: this.#timeoutMs };
        await listFullByFolder(this.#client, listing, accept);
      }
      if (caseInsensitive) {
        const groups = groupCaseCollisions(pending.map((p) => p.rel));
        const kept = new Set(groups.kept);
        for (const s of groups.shadowed) shadow(s.path, s.reason);
        for (const p of pending) if (kept.has(p.rel)) schedule(p.m, p.rel);
      }
      await Promise.all(writes);
    } catch (e) {
      // Let writes already started finish before the caller removes the folder.
      await Promise.allSettled(writes);
      throw toMountError(spec, e, signal);
    }
    if (signal.aborted) throw toMountError(spec, signal.reason, signal);

    const memories = Object.keys(baseline).length;
    const state = createSyncState({ storeId: spec.storeId, root: spec.root, access: spec.access, baseline, shadowed });
    const durationMs = this.#clock.now() - started;
    log.info({ root: spec.root, memories, durationMs }, 'memory store mounted');
    safeEmit(this, log, 'mounted', { storeId: spec.storeId, root: spec.root, memories, durationMs });
    return {
      store: { storeId: spec.storeId, name: spec.name, root: spec.root, access: spec.access, state, memories },
      runtime: { dir, cache, caseInsensitive, log, warnedSkips: new Set() },
    };
  }

  #handle(sessionId: string, stores: MountedStore[], runtimes: Map<MountedStore, StoreRuntime>, log: Logger): MountedSession {
    let unmounting: Promise<{ removed: string[]; kept: string[] }> | undefined;
    const runtime: SessionRuntime = {
      disposed: false,
      stores: runtimes,
      unmount: () => {
        unmounting ??= (async () => {
          runtime.disposed = true;
          for (const rt of runtime.stores.values()) rt.dir.dispose();
          const removed: string[] = [];
          const kept: string[] = [];
          for (const store of stores) {
            const rt = runtimes.get(store);
            const outcome = await unmountStore(store, rt?.dir ?? new LocalDir(store.root), rt?.log ?? log);
            (outcome.removed ? removed : kept).push(store.root);
            safeEmit(this, log, 'unmounted', { storeId: store.storeId, root: store.root, ...outcome });
          }
          return { removed, kept };
        })();
        return unmounting;
      },
    };
    const handle: MountedSession = {
      sessionId,
      stores,
      roots: stores.map((s) => s.root),
      readOnlyRoots: stores.filter((s) => s.access === 'read_only').map((s) => s.root),
      unmount: async () => {
        await runtime.unmount();
      },
    };
    attachRuntime(handle, runtime);
    return handle;
  }
}

/** Remove one store folder at the end, unless its marker is missing or altered and it still holds files. */
async function unmountStore(store: MountedStore, dir: LocalDir, log: Logger): Promise<{ removed: boolean; reason?: string }> {
  try {
    if (!(await dir.rootExists())) {
      const st = await fsp.lstat(store.root).catch(() => undefined);
      if (st === undefined) return { removed: true, reason: 'already gone' };
      const reason = `${store.root} is no longer a real folder; left as found`;
      log.warn({ root: store.root }, reason);
      return { removed: false, reason };
    }
    const marker = await dir.readMarker();
    const markerOk = marker !== undefined && isValidMarker(marker, store.storeId);
    if (!markerOk && !(await dir.isEmpty())) {
      const reason = `marker .anthropic-memory-store is ${marker === undefined ? 'missing' : 'altered'} and the folder holds files; kept so nothing foreign is deleted`;
      log.warn({ root: store.root }, `${reason}. Inspect ${store.root} and remove it by hand`);
      return { removed: false, reason };
    }
    await dir.removeRoot();
    return { removed: true };
  } catch (err) {
    log.warn({ root: store.root, err }, 'could not remove the memory folder; remove it by hand');
    return { removed: false, reason: coerceError(err).message };
  }
}

function validateSpecs(sessionId: string, specs: StoreSpec[]): void {
  if (specs.length > MAX_STORES_PER_SESSION) {
    const ids = specs.map((s) => s.storeId).join(', ');
    const beyond = specs.slice(MAX_STORES_PER_SESSION).map((s) => `${s.storeId} at ${s.root}`).join(', ');
    throw new MemoryMountError(
      `session ${sessionId} attaches ${specs.length} memory stores (${ids}); at most ${MAX_STORES_PER_SESSION} can be mounted ` +
        `per session (beyond the limit: ${beyond}). Detach ${specs.length - MAX_STORES_PER_SESSION} of them from the session.`,
      { storeId: specs[MAX_STORES_PER_SESSION]?.storeId, path: specs[MAX_STORES_PER_SESSION]?.root },
    );
  }
  for (let i = 0; i < specs.length; i++) {
    for (let j = 0; j < i; j++) {
      const a = specs[j]!;
      const b = specs[i]!;
      const nested = b.root.startsWith(`${a.root}/`) ? [b, a] : a.root.startsWith(`${b.root}/`) ? [a, b] : undefined;
      if (a.root === b.root) {
        throw new MemoryMountError(
          `memory stores ${a.storeId} (${a.name}) and ${b.storeId} (${b.name}) are both attached at ${b.root}; one folder holds ` +
            'one store. Attach one of them under another name so it gets its own mount_path.',
          { storeId: b.storeId, path: b.root },
        );
      }
      if (nested) {
        const [inner, outer] = nested as [StoreSpec, StoreSpec];
        throw new MemoryMountError(
          `memory store ${inner.storeId} (${inner.name}) would be mounted at ${inner.root}, inside the folder of store ` +
            `${outer.storeId} (${outer.name}) at ${outer.root}; its files would be synced into the other store. ` +
            'Attach the stores at sibling mount paths.',
          { storeId: inner.storeId, path: inner.root },
        );
      }
    }
  }
}

/** The host checks of M4/M5, before anything is created. */
async function checkHost(spec: StoreSpec): Promise<void> {
  const parent = path.dirname(spec.root);
  const who = `memory store ${spec.storeId} (${spec.name})`;
  const user = currentUser();
  const parentStat = await fsp.stat(parent).catch((e: unknown) => e as NodeJS.ErrnoException);
  if (parentStat instanceof Error) {
    throw new MemoryMountError(
      `${who}: the parent folder ${parent} of ${spec.root} does not exist (${parentStat.code ?? parentStat.message}); the worker creates ` +
        `only each store's own folder, never its parent. Prepare the host: mkdir -p ${parent} && chown ${user} ${parent}`,
      { storeId: spec.storeId, path: spec.root },
    );
  }
  if (!parentStat.isDirectory()) {
    throw new MemoryMountError(
      `${who}: the parent ${parent} of ${spec.root} is not a folder. Replace it with a folder writable by ${user}: ` +
        `mkdir -p ${parent} && chown ${user} ${parent}`,
      { storeId: spec.storeId, path: spec.root },
    );
  }
  try {
    await fsp.access(parent, fsc.W_OK | fsc.X_OK);
  } catch {
    throw new MemoryMountError(
      `${who}: the parent folder ${parent} of ${spec.root} is not writable by this process (user ${user}); the worker must ` +
        `create ${spec.root} in it. Prepare the host: chown ${user} ${parent} (or chmod u+wx ${parent})`,
      { storeId: spec.storeId, path: spec.root },
    );
  }
  const existing = await fsp.lstat(spec.root).catch(() => undefined);
  if (existing !== undefined) {
    throw alreadyExists(spec, existing.isSymbolicLink() ? 'a symlink' : existing.isDirectory() ? 'a folder' : 'a file');
  }
}

function alreadyExists(spec: StoreSpec, what: string): MemoryMountError {
  return new MemoryMountError(
    `memory store ${spec.storeId} (${spec.name}): ${spec.root} already exists (${what}); the worker never mounts over ` +
      'existing data. Remove it (after saving anything you need) or attach the store at another mount_path.',
    { storeId: spec.storeId, path: spec.root },
  );
}

async function createRoot(spec: StoreSpec): Promise<void> {
  try {
    await fsp.mkdir(spec.root, { mode: 0o755 });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') throw alreadyExists(spec, 'created meanwhile by someone else');
    throw new MemoryMountError(
      `memory store ${spec.storeId} (${spec.name}): could not create ${spec.root} (${code ?? coerceError(e).message}). ` +
        `Make its parent a folder writable by ${currentUser()}: mkdir -p ${path.dirname(spec.root)} && chown ${currentUser()} ${path.dirname(spec.root)}`,
      { storeId: spec.storeId, path: spec.root },
      { cause: e },
    );
  }
}

/** Create a lower-case probe file and look for its upper-case spelling. */
async function probeCaseInsensitive(root: string): Promise<boolean> {
  const name = `.maw-tmp-case-probe-${Math.random().toString(36).slice(2, 10)}`;
  const probe = path.join(root, name);
  const fh = await fsp.open(probe, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW, 0o600);
  await fh.close();
  try {
    await fsp.lstat(path.join(root, name.toUpperCase()));
    return true;
  } catch {
    return false;
  } finally {
    await fsp.unlink(probe).catch(() => {});
  }
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

async function removeAll(roots: string[], log: Logger): Promise<void> {
  await Promise.all(
    roots.map(async (root) => {
      try {
        await new LocalDir(root).removeRoot();
      } catch (err) {
        log.warn({ root, err }, 'could not remove a folder this failed mount created; remove it by hand');
      }
    }),
  );
}

function isUnholdableName(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENAMETOOLONG' || code === 'EILSEQ' || code === 'EINVAL';
}

/** `User Preferences` → `user-preferences`, as the API derives mount paths. */
export function slug(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

function currentUser(): string {
  try {
    return os.userInfo().username;
  } catch {
    return String(process.getuid?.() ?? '<worker user>');
  }
}
