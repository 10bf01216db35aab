import { createHash } from 'node:crypto';
import { constants as fsc } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { StateFileError } from '../../errors.js';
import type { OwnerIdentity } from '../rules/owner-verdict.js';
import { ensureStateSubdir, safeSegment, syncDir, writeFileDurable } from '../disk/state-dir.js';
import { parseSyncState } from '../rules/sync-state.js';
import { setPathKey } from '../rules/path-record.js';
import type { MemoryAccess, StoreSyncState } from '../rules/types.js';

/**
 * The journal: one file per mounted store, `<stateDir>/journal/<hash of the mount path>.json`,
 * holding what a later process needs to recover the folder after a crash: the store, session and
 * work item, the mount path, the owner process and the sync state (baseline per path). Written
 * atomically (temp + fsync + rename + folder fsync) after the mount and after every sync that
 * changed the state; removed when the folder is. It never holds a credential.
 */
export interface JournalEntry {
  version: 1;
  storeId: string;
  name: string;
  sessionId: string;
  workId: string | undefined;
  root: string;
  access: MemoryAccess;
  owner: OwnerIdentity;
  /**
   * The sync state. Times of pending deletes are stored as how long the file had been gone when
   * the entry was written (`goneForMs`), since monotonic times mean nothing to another process.
   */
  state: StoreSyncState;
  writtenAt: string;
  /**
   * Set right before the folder is removed at the end of a session, once everything in it reached
   * the store or was copied out: a crash during the removal leaves a folder that is only removed.
   */
  unmounting?: boolean;
  /**
   * Set from the moment the folder exists until every memory of the store is written in it. Files
   * are created straight under their names then, so one may be half written at a crash; and the
   * session has not started, so nothing in the folder is anyone's edit. A leftover in this state is
   * removed whole and downloaded again, never reconciled with the store.
   */
  downloading?: boolean;
}

const JOURNAL_FOLDER = 'journal';
const CARRIED_FOLDER = 'carried-deletes';

/**
 * Local deletions a session confirmed at its end but could not send (the bound cut the final sync
 * off, or the request failed), by store-relative path: the memory id and the sha it must still
 * hold. The next mount of that store sends them first, with that sha as precondition.
 */
export type CarriedDeletes = Record<string, { id: string; sha: string }>;

function fileNameFor(root: string): string {
  return `${createHash('sha256').update(path.resolve(root)).digest('hex').slice(0, 32)}.json`;
}

/** `state` with each pending delete's monotonic `sinceMs` turned into `goneForMs` as of `nowMs`. */
export function toJournalState(state: StoreSyncState, nowMs: number): StoreSyncState {
  const pendingDeletes: StoreSyncState['pendingDeletes'] = {};
  for (const [p, d] of Object.entries(state.pendingDeletes)) {
    const { sinceMs, ...rest } = d;
    setPathKey(pendingDeletes, p, { ...rest, goneForMs: sinceMs === undefined ? 0 : Math.max(0, nowMs - sinceMs) });
  }
  return { ...state, pendingDeletes };
}

/** The inverse of {@link toJournalState}: pending deletes get a `sinceMs` on this process's clock. */
export function fromJournalState(state: StoreSyncState, nowMs: number): StoreSyncState {
  const pendingDeletes: StoreSyncState['pendingDeletes'] = {};
  for (const [p, d] of Object.entries(state.pendingDeletes)) {
    const { goneForMs, ...rest } = d;
    setPathKey(pendingDeletes, p, { ...rest, sinceMs: nowMs - (goneForMs ?? 0) });
  }
  return { ...state, pendingDeletes };
}

export function parseJournalEntry(text: string): JournalEntry {
  const value = JSON.parse(text) as Record<string, unknown>;
  const bad = (field: string): never => {
    throw new StateFileError(`journal field "${field}" is missing or malformed`);
  };
  if (typeof value !== 'object' || value === null) bad('(root)');
  if (value['version'] !== 1) bad('version');
  for (const f of ['storeId', 'name', 'sessionId', 'root', 'writtenAt'] as const) if (typeof value[f] !== 'string') bad(f);
  if (value['workId'] !== undefined && typeof value['workId'] !== 'string') bad('workId');
  if (value['access'] !== 'read_write' && value['access'] !== 'read_only') bad('access');
  const owner = value['owner'] as Record<string, unknown> | undefined;
  if (typeof owner !== 'object' || owner === null || typeof owner['pid'] !== 'number') bad('owner');
  const state = parseSyncState(JSON.stringify(value['state']));
  if (state.storeId !== value['storeId'] || state.root !== value['root']) bad('state');
  return { ...(value as unknown as JournalEntry), state };
}

export type JournalRead = { file: string; entry: JournalEntry } | { file: string; error: string };

export class Journal {
  readonly stateDir: string;

  constructor(stateDir: string) {
    this.stateDir = path.resolve(stateDir);
  }

  get folder(): string {
    return path.join(this.stateDir, JOURNAL_FOLDER);
  }

  fileFor(root: string): string {
    return path.join(this.folder, fileNameFor(root));
  }

  async write(entry: JournalEntry): Promise<void> {
    const folder = await ensureStateSubdir(this.stateDir, [JOURNAL_FOLDER]);
    await writeFileDurable(path.join(folder, fileNameFor(entry.root)), `${JSON.stringify(entry)}\n`);
  }

  /** The entry of the folder at `root`; undefined when there is none; `error` when it cannot be parsed. */
  async read(root: string): Promise<JournalEntry | { error: string } | undefined> {
    let text: string;
    try {
      text = await readNoFollow(this.fileFor(root));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      return { error: (e as Error).message };
    }
    try {
      const entry = parseJournalEntry(text);
      return path.resolve(entry.root) === path.resolve(root) ? entry : { error: `the entry names another folder (${entry.root})` };
    } catch (e) {
      return { error: (e as Error).message };
    }
  }

  /** Every entry in the journal folder (unreadable ones with their error). */
  async list(): Promise<JournalRead[]> {
    let names: string[];
    try {
      names = await fsp.readdir(this.folder);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
    const out: JournalRead[] = [];
    for (const name of names.filter((n) => n.endsWith('.json')).sort()) {
      const file = path.join(this.folder, name);
      try {
        out.push({ file, entry: parseJournalEntry(await readNoFollow(file)) });
      } catch (e) {
        out.push({ file, error: (e as Error).message });
      }
    }
    return out;
  }

  /** Add `deletes` to the carried deletions of `storeId`. */
  async carryDeletes(storeId: string, deletes: CarriedDeletes): Promise<void> {
    if (Object.keys(deletes).length === 0) return;
    const folder = await ensureStateSubdir(this.stateDir, [CARRIED_FOLDER]);
    const merged = { ...(await this.carriedDeletes(storeId)), ...deletes };
    await writeFileDurable(path.join(folder, `${safeSegment(storeId)}.json`), `${JSON.stringify({ storeId, deletes: merged })}\n`);
  }

  /** The carried deletions of `storeId` (empty when none or unreadable). */
  async carriedDeletes(storeId: string): Promise<CarriedDeletes> {
    try {
      const value = JSON.parse(await readNoFollow(path.join(this.stateDir, CARRIED_FOLDER, `${safeSegment(storeId)}.json`))) as {
        storeId?: unknown;
        deletes?: Record<string, { id?: unknown; sha?: unknown }>;
      };
      if (value.storeId !== storeId || typeof value.deletes !== 'object' || value.deletes === null) return {};
      const out: CarriedDeletes = {};
      for (const [rel, d] of Object.entries(value.deletes)) {
        if (typeof d?.id === 'string' && typeof d.sha === 'string') setPathKey(out, rel, { id: d.id, sha: d.sha });
      }
      return out;
    } catch {
      return {};
    }
  }

  /** Replace the carried deletions of `storeId` with `remaining` (removing the file when empty). */
  async settleCarried(storeId: string, remaining: CarriedDeletes): Promise<void> {
    const file = path.join(this.stateDir, CARRIED_FOLDER, `${safeSegment(storeId)}.json`);
    if (Object.keys(remaining).length > 0) {
      await writeFileDurable(file, `${JSON.stringify({ storeId, deletes: remaining })}\n`);
      return;
    }
    await fsp.unlink(file).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOENT') throw e;
    });
  }

  async remove(root: string): Promise<void> {
    try {
      await fsp.unlink(this.fileFor(root));
      await syncDir(this.folder);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
}

async function readNoFollow(file: string): Promise<string> {
  const fh = await fsp.open(file, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new StateFileError(`${file} is not a regular file`, { path: file });
    return await fh.readFile('utf8');
  } finally {
    await fh.close();
  }
}
