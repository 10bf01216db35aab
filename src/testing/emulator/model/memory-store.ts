import { createHash } from 'node:crypto';
import { API_LIMITS } from '../../../internal/defaults.js';
import { ApiError, conflict, invalidRequest, notFound } from '../errors.js';
import { isoTime, newId } from '../ids.js';
import { listingEntries, memoryPathProblem, pathsOverlap } from './memory-paths.js';

/** Limits a store enforces; defaults are the API's documented values. */
export interface MemoryLimits {
  /** Largest memory content in UTF-8 bytes (default 102 400). */
  maxContentBytes: number;
  /** Most memories one store may hold (default 2000). */
  maxMemoriesPerStore: number;
}

export const DEFAULT_MEMORY_LIMITS: MemoryLimits = {
  maxContentBytes: API_LIMITS.memoryBytes,
  maxMemoriesPerStore: API_LIMITS.memoriesPerStore,
};

export type MemoryView = 'basic' | 'full';

/** One memory as stored. */
export interface MemoryRecord {
  id: string;
  path: string;
  content: string;
  sha256: string;
  sizeBytes: number;
  versionId: string;
  createdAt: string;
  updatedAt: string;
}

/** One write a store took, in order: what a test reads to learn whether some bytes ever reached it. */
export interface MemoryWrite {
  /** 1, 2, 3… within the store. */
  seq: number;
  /** What the write did to the memory. */
  op: 'create' | 'update' | 'delete';
  /** The memory's id (`mem_…`). */
  memoryId: string;
  /** The memory's path after the write (before it, for a delete). */
  path: string;
  /** Content after the write; `null` for a delete. */
  content: string | null;
  /** Lowercase hex SHA-256 of the content after the write; `null` for a delete. */
  sha256: string | null;
}

/** Wire shape `BetaManagedAgentsMemory`. */
export interface MemoryObject {
  /** The memory's id (`mem_…`). */
  id: string;
  /** Always `memory`. */
  type: 'memory';
  /** The memory's path in its store (`/notes/todo.md`). */
  path: string;
  /** The content, or `null` when the request did not ask for it (`view` other than `full`). */
  content: string | null;
  /** Lowercase hex SHA-256 of the content's UTF-8 bytes. */
  content_sha256: string;
  /** Size of the content in UTF-8 bytes. */
  content_size_bytes: number;
  /** The store that holds it. */
  memory_store_id: string;
  /** The id of its current version. */
  memory_version_id: string;
  /** ISO time of its creation. */
  created_at: string;
  /** ISO time of its last change. */
  updated_at: string;
}

/** Wire shape `BetaManagedAgentsMemoryPrefix`. */
export interface MemoryPrefixObject {
  /** Always `memory_prefix`: a folder in a listing cut at its `depth`. */
  type: 'memory_prefix';
  /** The folder's path, ending in `/`. */
  path: string;
}

/** Wire shape `BetaManagedAgentsMemoryStore`. */
export interface MemoryStoreObject {
  /** The store's id (`memstore_…`). */
  id: string;
  /** Always `memory_store`. */
  type: 'memory_store';
  /** The store's name. */
  name: string;
  /** The store's description (`''` when none was given). */
  description: string;
  /** The store's metadata. */
  metadata: Record<string, string>;
  /** ISO time of its creation. */
  created_at: string;
  /** ISO time of its last change. */
  updated_at: string;
  /** ISO time it was archived, or `null`. */
  archived_at: string | null;
}

/** Lowercase hex SHA-256 of the exact UTF-8 bytes of `content`. */
export function sha256Hex(content: string): string {
  return createHash('sha256').update(content, 'utf8').digest('hex');
}

/**
 * One memory store and its memories, with every rule of the memory endpoints: path validity and
 * overlap, content cap, memory count cap, preconditions, archived-store refusal. Throws
 * {@link ApiError}s; both the HTTP routes and the emulator's direct helpers go through it.
 */
export class MemoryStore {
  readonly id: string;
  name: string;
  description: string;
  metadata: Record<string, string>;
  readonly createdAt: string;
  updatedAt: string;
  archivedAt: string | null = null;
  readonly #limits: MemoryLimits;
  readonly #byId = new Map<string, MemoryRecord>();
  readonly #byPath = new Map<string, MemoryRecord>();
  readonly #writes: MemoryWrite[] = [];

  constructor(init: { name: string; description?: string; metadata?: Record<string, string>; limits: MemoryLimits }) {
    this.id = newId('memstore');
    this.name = init.name;
    this.description = init.description ?? '';
    this.metadata = { ...(init.metadata ?? {}) };
    this.createdAt = isoTime();
    this.updatedAt = this.createdAt;
    this.#limits = init.limits;
  }

  toObject(): MemoryStoreObject {
    return {
      id: this.id,
      type: 'memory_store',
      name: this.name,
      description: this.description,
      metadata: { ...this.metadata },
      created_at: this.createdAt,
      updated_at: this.updatedAt,
      archived_at: this.archivedAt,
    };
  }

  memoryObject(record: MemoryRecord, view: MemoryView): MemoryObject {
    return {
      id: record.id,
      type: 'memory',
      path: record.path,
      content: view === 'full' ? record.content : null,
      content_sha256: record.sha256,
      content_size_bytes: record.sizeBytes,
      memory_store_id: this.id,
      memory_version_id: record.versionId,
      created_at: record.createdAt,
      updated_at: record.updatedAt,
    };
  }

  /** Archive (idempotent): `archived_at` set and `updated_at` moved with it. */
  archive(): void {
    if (this.archivedAt !== null) return;
    this.archivedAt = isoTime();
    this.updatedAt = this.archivedAt;
  }

  get size(): number {
    return this.#byId.size;
  }

  /** `{ path: content }` of every memory, ascending by path. */
  snapshot(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const path of [...this.#byPath.keys()].sort()) out[path] = this.#byPath.get(path)!.content;
    return out;
  }

  /** Every write the store took (API and Console alike), oldest first; a write that changed nothing is not one. */
  history(): MemoryWrite[] {
    return this.#writes.map((w) => ({ ...w }));
  }

  #recordWrite(op: MemoryWrite['op'], record: MemoryRecord): void {
    const gone = op === 'delete';
    this.#writes.push({
      seq: this.#writes.length + 1,
      op,
      memoryId: record.id,
      path: record.path,
      content: gone ? null : record.content,
      sha256: gone ? null : record.sha256,
    });
  }

  byPath(path: string): MemoryRecord | undefined {
    return this.#byPath.get(path);
  }

  get(memoryId: string): MemoryRecord {
    const record = this.#byId.get(memoryId);
    if (!record) throw notFound(`memory ${memoryId} does not exist in memory store ${this.id}`);
    return record;
  }

  create(path: string, content: string): MemoryRecord {
    this.#refuseWhenArchived('create a memory');
    this.#checkPath(path, undefined);
    const bytes = this.#checkContent(content);
    if (this.#byId.size >= this.#limits.maxMemoriesPerStore) {
      throw invalidRequest(
        `memory store ${this.id} already holds ${this.#byId.size} memories, the most a store may hold ` +
          `(${this.#limits.maxMemoriesPerStore}); delete some before creating ${path}`,
      );
    }
    const now = isoTime();
    const record: MemoryRecord = {
      id: newId('mem'),
      path,
      content,
      sha256: sha256Hex(content),
      sizeBytes: bytes,
      versionId: newId('memver'),
      createdAt: now,
      updatedAt: now,
    };
    this.#byId.set(record.id, record);
    this.#byPath.set(path, record);
    this.#recordWrite('create', record);
    return record;
  }

  /**
   * Update content and/or path (rename keeps the id). A `content_sha256` precondition is checked
   * against the current content; on mismatch it is a 409 unless the memory already holds exactly
   * what was asked.
   */
  update(memoryId: string, change: { content?: string; path?: string; expectedSha256?: string }): MemoryRecord {
    const record = this.get(memoryId);
    const nextPath = change.path ?? record.path;
    const nextContent = change.content ?? record.content;
    const unchanged = nextPath === record.path && nextContent === record.content;
    if (change.expectedSha256 !== undefined && change.expectedSha256 !== record.sha256 && !unchanged) {
      throw new ApiError(
        409,
        'memory_precondition_failed_error',
        `memory ${memoryId} (${record.path}) no longer has content_sha256 ${change.expectedSha256}; ` +
          'read it again and retry with its current content_sha256',
        { shouldRetry: false },
      );
    }
    this.#refuseWhenArchived('update a memory');
    if (unchanged) return record;
    if (nextPath !== record.path) this.#checkPath(nextPath, record.id);
    const bytes = this.#checkContent(nextContent);
    if (nextPath !== record.path) {
      this.#byPath.delete(record.path);
      record.path = nextPath;
      this.#byPath.set(nextPath, record);
    }
    if (nextContent !== record.content) {
      record.content = nextContent;
      record.sha256 = sha256Hex(nextContent);
      record.sizeBytes = bytes;
    }
    record.versionId = newId('memver');
    record.updatedAt = isoTime();
    this.#recordWrite('update', record);
    return record;
  }

  delete(memoryId: string, expectedSha256?: string): void {
    const record = this.get(memoryId);
    if (expectedSha256 !== undefined && expectedSha256 !== record.sha256) {
      throw new ApiError(
        409,
        'memory_precondition_failed_error',
        `memory ${memoryId} (${record.path}) no longer has content_sha256 ${expectedSha256}; nothing was deleted`,
        { shouldRetry: false },
      );
    }
    this.#byId.delete(record.id);
    this.#byPath.delete(record.path);
    this.#recordWrite('delete', record);
  }

  /** Create, or overwrite unconditionally, the memory at `path` (a Console edit). */
  put(path: string, content: string): MemoryRecord {
    const existing = this.#byPath.get(path);
    if (existing) return this.update(existing.id, { content });
    return this.create(path, content);
  }

  /** Listing rows after `afterPath` (exclusive), at most `limit`, plus whether more follow. */
  list(opts: { prefix: string; depth: number; afterPath?: string; limit: number; view: MemoryView }): {
    items: Array<MemoryObject | MemoryPrefixObject>;
    lastPath: string | undefined;
    more: boolean;
  } {
    const entries = listingEntries(this.#byPath.keys(), opts.prefix, opts.depth);
    const after = opts.afterPath;
    const start = after === undefined ? 0 : entries.findIndex((e) => e.path > after);
    const from = start === -1 ? entries.length : start;
    const page = entries.slice(from, from + opts.limit);
    const items = page.map((entry): MemoryObject | MemoryPrefixObject =>
      entry.kind === 'prefix' ? { type: 'memory_prefix', path: entry.path } : this.memoryObject(this.#byPath.get(entry.path)!, opts.view),
    );
    return { items, lastPath: page.at(-1)?.path, more: from + opts.limit < entries.length };
  }

  #refuseWhenArchived(action: string): void {
    if (this.archivedAt !== null) {
      throw invalidRequest(`memory store ${this.id} is archived; cannot ${action} in it (reads and deletes still work)`);
    }
  }

  #checkPath(path: string, selfId: string | undefined): void {
    const problem = memoryPathProblem(path);
    if (problem) throw invalidRequest(`path ${JSON.stringify(path)} ${problem}`);
    for (const other of this.#byId.values()) {
      if (other.id === selfId) continue;
      if (pathsOverlap(path, other.path)) {
        const how = other.path === path ? 'is already taken by' : 'overlaps';
        throw new ApiError(
          409,
          'memory_path_conflict_error',
          `path ${path} ${how} memory ${other.id} at ${other.path}; a memory path may not equal, contain or be contained in another`,
          { fields: { conflicting_memory_id: other.id, conflicting_path: other.path }, shouldRetry: false },
        );
      }
    }
  }

  #checkContent(content: string): number {
    const bytes = Buffer.byteLength(content, 'utf8');
    if (bytes > this.#limits.maxContentBytes) {
      throw new ApiError(
        413,
        'request_too_large',
        `memory content is ${bytes} bytes; the most a memory may hold is ${this.#limits.maxContentBytes} bytes`,
      );
    }
    return bytes;
  }
}
