import type Anthropic from '@anthropic-ai/sdk';
import type { BetaManagedAgentsMemory } from '@anthropic-ai/sdk/resources/beta/memory-stores/memories';
import { errorTypeOf, isApiError, isConnectionError, isUserAbortError, statusOf } from '../api/classify.js';
import { abortReason, isAbortError } from '../internal/abort.js';

/**
 * The memory endpoints of one store, as the sync needs them, with a per-request retry policy:
 * - reads (list, retrieve) let the client retry transient failures (they are idempotent);
 * - writes (create, update, delete) are sent once (`maxRetries: 0`): a deterministic 409 costs one
 *   request, and a write whose response was lost is settled by the next listing (sent shas), not by
 *   blindly re-sending it.
 * Every call carries the caller's signal, so aborting really cancels the request in flight.
 * Write failures come back as values (never thrown), classified for the planner's `applyOutcome`;
 * only an abort is thrown.
 */

/** One memory as listed; `path` is the server path (leading `/`). */
export interface RemoteMemory {
  id: string;
  path: string;
  sha: string;
  sizeBytes: number;
  updatedAt: string;
}

export interface RemoteMemoryWithContent extends RemoteMemory {
  content: string;
}

export type RemoteFailure = 'precondition' | 'not-found' | 'refused' | 'transient' | 'lost-response';

export type RemoteWriteResult =
  | { ok: true; id: string; sha: string; updatedAt: string }
  | { ok: false; failure: RemoteFailure; reason: string; status: number | undefined };

export type RemoteDeleteResult = { ok: true } | { ok: false; failure: RemoteFailure; reason: string; status: number | undefined };

export interface RemoteStoreOptions {
  /** Retries the client may spend on a listing or retrieve page (transient failures only). Default 2. */
  readRetries?: number;
  /** Per-request timeout in ms (time to response headers). Default 60 000. */
  requestTimeoutMs?: number;
}

/** Page sizes the API caps: 100 in the basic view, 20 in the full view (api-contract §7.4). */
export const BASIC_PAGE_LIMIT = 100;
export const FULL_PAGE_LIMIT = 20;

export class RemoteStore {
  readonly storeId: string;
  readonly #client: Anthropic;
  readonly #readRetries: number;
  readonly #timeoutMs: number;

  constructor(client: Anthropic, storeId: string, opts: RemoteStoreOptions = {}) {
    this.#client = client;
    this.storeId = storeId;
    this.#readRetries = opts.readRetries ?? 2;
    this.#timeoutMs = opts.requestTimeoutMs ?? 60_000;
  }

  /** Every memory in the store, basic view: one request per 100 memories. */
  async listBasic(signal?: AbortSignal): Promise<RemoteMemory[]> {
    const out: RemoteMemory[] = [];
    await this.#eachPage('basic', BASIC_PAGE_LIMIT, signal, (m) => out.push(toRemote(m)));
    return out;
  }

  /** Every memory with its content, full view: one request per 20 memories. */
  async listFull(signal: AbortSignal | undefined, onMemory: (m: RemoteMemoryWithContent) => Promise<void> | void): Promise<void> {
    await this.#eachPage('full', FULL_PAGE_LIMIT, signal, (m) => onMemory({ ...toRemote(m), content: m.content ?? '' }));
  }

  /** One memory with its content. Throws (classified by the caller) on failure. */
  async retrieve(id: string, signal?: AbortSignal): Promise<RemoteMemoryWithContent> {
    const m = await this.#client.beta.memoryStores.memories.retrieve(
      id,
      { memory_store_id: this.storeId, view: 'full' },
      { signal, maxRetries: this.#readRetries, timeout: this.#timeoutMs },
    );
    return { ...toRemote(m), content: m.content ?? '' };
  }

  async create(serverPath: string, content: string, signal?: AbortSignal): Promise<RemoteWriteResult> {
    return this.#write(serverPath, signal, () =>
      this.#client.beta.memoryStores.memories.create(
        this.storeId,
        { path: serverPath, content },
        { signal, maxRetries: 0, timeout: this.#timeoutMs },
      ),
    );
  }

  /** Update the content of `id`, only if the store still holds `expectedSha` (content_sha256 precondition). */
  async update(id: string, serverPath: string, content: string, expectedSha: string, signal?: AbortSignal): Promise<RemoteWriteResult> {
    return this.#write(serverPath, signal, () =>
      this.#client.beta.memoryStores.memories.update(
        id,
        {
          memory_store_id: this.storeId,
          content,
          precondition: { type: 'content_sha256', content_sha256: expectedSha },
        },
        { signal, maxRetries: 0, timeout: this.#timeoutMs },
      ),
    );
  }

  /** Delete `id`, only if the store still holds `expectedSha`. A 404 counts as done. */
  async delete(id: string, expectedSha: string, signal?: AbortSignal): Promise<RemoteDeleteResult> {
    try {
      await this.#client.beta.memoryStores.memories.delete(
        id,
        { memory_store_id: this.storeId, expected_content_sha256: expectedSha },
        { signal, maxRetries: 0, timeout: this.#timeoutMs },
      );
      return { ok: true };
    } catch (e) {
      rethrowAbort(e, signal);
      if (statusOf(e) === 404) return { ok: true };
      return { ok: false, ...classifyWriteFailure(e, undefined) };
    }
  }

  async #write(serverPath: string, signal: AbortSignal | undefined, call: () => Promise<BetaManagedAgentsMemory>): Promise<RemoteWriteResult> {
    try {
      const m = await call();
      return { ok: true, id: m.id, sha: m.content_sha256, updatedAt: m.updated_at };
    } catch (e) {
      rethrowAbort(e, signal);
      return { ok: false, ...classifyWriteFailure(e, serverPath) };
    }
  }

  async #eachPage(
    view: 'basic' | 'full',
    limit: number,
    signal: AbortSignal | undefined,
    onItem: (m: BetaManagedAgentsMemory) => unknown,
  ): Promise<void> {
    let page = await this.#client.beta.memoryStores.memories.list(
      this.storeId,
      { view, limit },
      { signal, maxRetries: this.#readRetries, timeout: this.#timeoutMs },
    );
    for (;;) {
      for (const item of page.data) {
        if (item.type === 'memory') await onItem(item);
      }
      if (!page.hasNextPage()) return;
      page = await page.getNextPage();
    }
  }
}

function toRemote(m: BetaManagedAgentsMemory): RemoteMemory {
  return { id: m.id, path: m.path, sha: m.content_sha256, sizeBytes: m.content_size_bytes, updatedAt: m.updated_at };
}

/** Rethrow aborts (ours or the signal's) so a cancelled sync stops instead of recording failures. */
export function rethrowAbort(e: unknown, signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortReason(signal);
  if (isUserAbortError(e) || (isAbortError(e) && !isConnectionError(e))) throw e;
}

/**
 * Start of the refusal reason of an upload refused because another memory's path overlaps it (a
 * local file where the store has a folder, or a local folder where the store has a file). Unlike
 * other refusals it does not depend on the file's content only: once the conflicting memory is gone
 * from the store (typically deleted by a later sync, when the agent replaced a file by a folder),
 * the path is retried.
 */
export const PATH_CONFLICT_REASON_PREFIX = 'path conflict: the store holds an overlapping memory at ';

/** True for a refusal reason recorded for a path conflict (see {@link PATH_CONFLICT_REASON_PREFIX}). */
export function isPathConflictReason(reason: string): boolean {
  return reason.startsWith(PATH_CONFLICT_REASON_PREFIX);
}

/** Map a failed write to what the planner needs to know about it. */
export function classifyWriteFailure(e: unknown, serverPath: string | undefined): { failure: RemoteFailure; reason: string; status: number | undefined } {
  const status = statusOf(e);
  const type = errorTypeOf(e);
  const reason = describe(e, status, type);
  if (isConnectionError(e) || (status === undefined && !isApiError(e))) {
    // The request may or may not have been applied: the next listing settles it.
    return { failure: 'lost-response', reason, status };
  }
  if (status === 409 && type === 'memory_precondition_failed_error') return { failure: 'precondition', reason, status };
  if (status === 409 && type === 'memory_path_conflict_error') {
    // An ancestor or descendant path is taken (a local file where the store has a folder, or the
    // reverse): it will fail again until something changes, so report it once.
    // The refusal lasts only while the conflicting memory is listed: the sync loop retries the
    // path once it is gone (see {@link isPathConflictReason}).
    const conflicting = conflictingPathOf(e);
    if (conflicting !== undefined && conflicting !== serverPath) {
      return { failure: 'refused', reason: `${PATH_CONFLICT_REASON_PREFIX}${conflicting}; ${reason}`, status };
    }
    return { failure: 'transient', reason, status };
  }
  if (status === 404) return { failure: 'not-found', reason, status };
  if (status === 400 || status === 413 || status === 422) return { failure: 'refused', reason, status };
  return { failure: 'transient', reason, status };
}

function conflictingPathOf(e: unknown): string | undefined {
  if (!isApiError(e)) return undefined;
  const body = e.error as { error?: { conflicting_path?: unknown; details?: { conflicting_path?: unknown } } } | undefined;
  const p = body?.error?.conflicting_path ?? body?.error?.details?.conflicting_path;
  return typeof p === 'string' && p !== '' ? p : undefined;
}

function describe(e: unknown, status: number | undefined, type: string | undefined): string {
  if (isApiError(e)) {
    const body = e.error as { error?: { message?: unknown } } | undefined;
    const msg = typeof body?.error?.message === 'string' ? body.error.message : e.message;
    return `${status !== undefined ? `HTTP ${status}` : 'no response'}${type ? ` ${type}` : ''}: ${msg}`;
  }
  return e instanceof Error ? e.message : String(e);
}
