import * as fsp from 'node:fs/promises';
import { coerceError } from '../../errors.js';
import type { Clock } from '../../internal/clock.js';
import { errorSummary, type Logger } from '../../internal/logger.js';
import { toJournalState, type CarriedDeletes, type Journal } from '../journal/journal.js';
import { JournalChangeCheck } from '../journal/journal-serialisation.js';
import type { LocalDir } from '../disk/local-dir.js';
import { isValidMarker } from '../rules/marker.js';
import type { OwnerIdentity } from '../rules/owner-verdict.js';
import type { StatCache } from '../disk/stat-cache.js';
import type { MemoryAccess, MemoryEventMap, StoreSyncState } from '../rules/types.js';

/** Where and for whom a mounted store's journal entry is written. */
export interface JournalBinding {
  journal: Journal;
  sessionId: string;
  workId: string | undefined;
  owner: OwnerIdentity;
  clock: Clock;
}

export interface MountedStoreInit {
  storeId: string;
  name: string;
  root: string;
  access: MemoryAccess;
  memories: number;
  dir: LocalDir;
  cache: StatCache;
  caseInsensitive: boolean;
  log: Logger;
  state: StoreSyncState;
  journal?: JournalBinding | undefined;
}

/**
 * One mounted store, and the one owner of everything about its folder: the hardened folder handle,
 * the stat cache, the sync state, the journal entry and the removal at the end. The SyncLoop
 * advances the state through {@link commit}; nothing else writes it.
 */
export class MountedStore {
  readonly storeId: string;
  /** The store's name as the session snapshotted it (the id when the session gives none). */
  readonly name: string;
  /** Absolute path of the store's folder. */
  readonly root: string;
  readonly access: MemoryAccess;
  /** Memories materialised by the download (or held by an adopted folder). */
  readonly memories: number;
  readonly dir: LocalDir;
  readonly cache: StatCache;
  readonly caseInsensitive: boolean;
  readonly log: Logger;
  /** Paths already warned about as skipped, so each is warned once. */
  readonly warnedSkips = new Set<string>();
  #journal: JournalBinding | undefined;
  #state: StoreSyncState;
  readonly #journaled = new JournalChangeCheck();
  /** Set once the folder is removed: the journal entry is never written again. */
  #closed = false;

  constructor(init: MountedStoreInit) {
    this.storeId = init.storeId;
    this.name = init.name;
    this.root = init.root;
    this.access = init.access;
    this.memories = init.memories;
    this.dir = init.dir;
    this.cache = init.cache;
    this.caseInsensitive = init.caseInsensitive;
    this.log = init.log;
    this.#state = init.state;
    this.#journal = init.journal;
  }

  /** The sync state as of the last completed sync (the download counts as one). */
  get state(): StoreSyncState {
    return this.#state;
  }

  /** Record the state a sync produced; the journal is rewritten when it changed. Never throws. */
  async commit(state: StoreSyncState): Promise<void> {
    this.#state = state;
    try {
      await this.writeJournal();
    } catch (err) {
      this.log.warn(
        { error: errorSummary(coerceError(err)) },
        'could not write the journal entry; a crash now would leave this folder unrecoverable',
      );
    }
  }

  /**
   * Write the journal entry if the state changed since the last write. Throws on failure.
   * `downloading` marks a folder whose download has not finished (see `JournalEntry.downloading`);
   * the next write without it clears the mark.
   */
  async writeJournal(opts: { unmounting?: boolean; downloading?: boolean } = {}): Promise<void> {
    const j = this.#journal;
    if (j === undefined || this.#closed) return;
    if (opts.unmounting) this.#journaled.reset();
    const state = this.#state;
    const change = this.#journaled.changed(state);
    if (change === undefined) return;
    await j.journal.write({
      version: 1,
      storeId: this.storeId,
      name: this.name,
      sessionId: j.sessionId,
      workId: j.workId,
      root: this.root,
      access: this.access,
      owner: j.owner,
      state: toJournalState(state, j.clock.now()),
      writtenAt: new Date().toISOString(),
      ...(opts.unmounting ? { unmounting: true } : {}),
      ...(opts.downloading ? { downloading: true } : {}),
    });
    // After a `downloading` entry the next write goes out whatever the state, to clear the mark.
    if (opts.downloading) this.#journaled.reset();
    else this.#journaled.written(state, change.digest);
  }

  /** Hand local deletions this session could not send to the next session of the store. */
  async carryDeletes(deletes: CarriedDeletes): Promise<void> {
    await this.#journal?.journal.carryDeletes(this.storeId, deletes);
  }

  async removeJournal(): Promise<void> {
    this.#closed = true;
    await this.#journal?.journal.remove(this.root);
  }

  /**
   * Give the folder up while it stays on disk (a failed adoption, a folder kept at the end): the
   * entry is rewritten with no live owner, so the next mount of the store, in this process or
   * another, may adopt it. Never throws.
   */
  async release(): Promise<void> {
    const j = this.#journal;
    if (j === undefined || this.#closed) return;
    this.#journal = { ...j, owner: { pid: 0 } };
    this.#journaled.reset();
    try {
      await this.writeJournal();
    } catch (err) {
      this.log.warn(
        { error: errorSummary(coerceError(err)) },
        'could not release the journal entry; the folder is adopted once this process is gone',
      );
    }
    this.#closed = true;
  }

  /** Remove the folder unless its marker is missing or altered while it still holds files. */
  async removeFolder(): Promise<{ removed: boolean; reason?: string }> {
    const { dir, root, log } = this;
    try {
      if (!(await dir.rootExists())) {
        const st = await fsp.lstat(root).catch(() => undefined);
        if (st === undefined) return { removed: true, reason: 'already gone' };
        const reason = `${root} is no longer a real folder; left as found`;
        log.warn({ root }, reason);
        return { removed: false, reason };
      }
      const marker = await dir.readMarker();
      const markerOk = marker !== undefined && isValidMarker(marker, this.storeId);
      if (!markerOk && !(await dir.isEmpty())) {
        const reason = `marker .anthropic-memory-store is ${marker === undefined ? 'missing' : 'altered'} and the folder holds files; kept so nothing foreign is deleted`;
        log.warn({ root }, `${reason}. Inspect ${root} and remove it by hand`);
        return { removed: false, reason };
      }
      // From here a crash leaves a half-removed folder: the entry says it is only to be removed.
      await this.writeJournal({ unmounting: true }).catch(() => {});
      await dir.removeRoot();
      return { removed: true };
    } catch (err) {
      log.warn({ root, error: errorSummary(err) }, 'could not remove the memory folder; remove it by hand');
      return { removed: false, reason: coerceError(err).message };
    }
  }
}

export interface UnmountReport {
  removed: string[];
  kept: string[];
}

/**
 * The handle a mount returns: the session's mounted stores, and their one unmount. The unmount
 * removes each folder (and then its journal entry), emits `unmounted` once per store, and from
 * then on nothing touches the folders.
 */
export class MountedSession {
  readonly sessionId: string;
  readonly stores: MountedStore[];
  /** Every store folder, read-write and read-only alike (what the file tools may open). */
  readonly roots: string[];
  /** Folders of read-only stores (the write/edit tools refuse them). */
  readonly readOnlyRoots: string[];
  readonly #emit: (payload: MemoryEventMap['unmounted'][0]) => void;
  #disposed = false;
  #unmounting: Promise<UnmountReport> | undefined;

  /** Awaited at the end of the unmount (the content cache's writes behind the mount). */
  readonly #settle: () => Promise<void>;

  constructor(
    sessionId: string,
    stores: MountedStore[],
    emit: (payload: MemoryEventMap['unmounted'][0]) => void,
    settle: () => Promise<void> = async () => {},
  ) {
    this.#settle = settle;
    this.sessionId = sessionId;
    this.stores = stores;
    this.roots = stores.map((s) => s.root);
    this.readOnlyRoots = stores.filter((s) => s.access === 'read_only').map((s) => s.root);
    this.#emit = emit;
  }

  /** True once the unmount started: nothing touches the folders any more. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * Remove the folders. `keep` names roots to leave in place (with their journal entry), e.g. one
   * holding a file that could not be copied out. Idempotent: a second call returns the first report.
   */
  unmount(opts: { keep?: ReadonlyMap<string, string> } = {}): Promise<UnmountReport> {
    this.#unmounting ??= (async () => {
      this.#disposed = true;
      for (const s of this.stores) s.dir.dispose();
      // Each store's folder and journal entry are its own: the stores go away side by side.
      const outcomes = await Promise.all(
        this.stores.map(async (store) => {
          const keepReason = opts.keep?.get(store.root);
          const outcome = keepReason !== undefined ? { removed: false, reason: keepReason } : await store.removeFolder();
          if (outcome.removed) {
            await store
              .removeJournal()
              .catch((err: unknown) => store.log.warn({ error: errorSummary(coerceError(err)) }, 'could not remove the journal entry'));
          } else {
            await store.release();
          }
          this.#emit({ storeId: store.storeId, root: store.root, ...outcome });
          return outcome;
        }),
      );
      const removed = this.stores.filter((_, i) => outcomes[i]!.removed).map((s) => s.root);
      const kept = this.stores.filter((_, i) => !outcomes[i]!.removed).map((s) => s.root);
      await this.#settle().catch(() => {});
      return { removed, kept };
    })();
    return this.#unmounting;
  }
}
