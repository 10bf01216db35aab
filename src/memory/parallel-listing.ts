import type Anthropic from '@anthropic-ai/sdk';
import type { BetaManagedAgentsMemory } from '@anthropic-ai/sdk/resources/beta/memory-stores/memories';
import type { LimitFunction } from 'p-limit';
import { FULL_PAGE_LIMIT, type RemoteMemoryWithContent } from './remote-store.js';

/**
 * Lists every memory of a store with its content, one cursor per top-level folder instead of one
 * cursor for the whole store, so a large store downloads in a few round trips.
 *
 * Rules:
 * - a first full-view listing of `/` at depth 1 yields the top-level memories and one
 *   `memory_prefix` per top-level folder; each folder is then paged on its own cursor, every page
 *   request going through `limit` (shared by all stores of a mount, so the pages in flight, and the
 *   memory they hold, stay bounded);
 * - each memory is handed to `onMemory` as its page arrives; when `onMemory` returns a promise the
 *   listing waits for it (backpressure); no page is kept past its memories;
 * - a server that ignores `depth` (and so lists everything at once) or lists a path twice still
 *   yields each path once;
 * - a listing stops with an error when a cursor repeats or the store yields more than
 *   `maxMemories` memories: a wrong server costs an error, never unbounded time or memory.
 */
/** Most memories a store holds (the API's per-store limit); a listing yielding more is stopped. */
export const MAX_LISTED_MEMORIES = 2000;

export interface ParallelListingOptions {
  storeId: string;
  signal: AbortSignal;
  /** Bounds the page requests in flight. */
  limit: LimitFunction;
  /** Most memories a store may yield. */
  maxMemories: number;
  /** Retries the client may spend on a page (transient failures only). */
  readRetries: number;
  /** Per-request timeout in ms. */
  requestTimeoutMs: number;
}

export class ListingBoundError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ListingBoundError';
  }
}

export async function listFullByFolder(
  client: Anthropic,
  opts: ParallelListingOptions,
  onMemory: (m: RemoteMemoryWithContent) => Promise<void> | void,
): Promise<void> {
  const seen = new Set<string>();
  const accept = (m: BetaManagedAgentsMemory): Promise<void> | void => {
    if (seen.has(m.path)) return;
    seen.add(m.path);
    if (seen.size > opts.maxMemories) {
      throw new ListingBoundError(`memory store ${opts.storeId} listed more than ${opts.maxMemories} memories; the listing was stopped`);
    }
    return onMemory({ id: m.id, path: m.path, sha: m.content_sha256, sizeBytes: m.content_size_bytes, updatedAt: m.updated_at, content: m.content ?? '' });
  };
  const folders: string[] = [];
  await pageAll(client, opts, { path_prefix: '/', depth: 1 }, (item) => {
    if (item.type === 'memory') return accept(item as BetaManagedAgentsMemory);
    if (item.type === 'memory_prefix' && typeof item.path === 'string' && item.path !== '/' && item.path.startsWith('/')) folders.push(item.path);
    return undefined;
  });
  const unique = [...new Set(folders)];
  await Promise.all(
    unique.map((prefix) =>
      pageAll(client, opts, { path_prefix: prefix }, (item) => (item.type === 'memory' ? accept(item as BetaManagedAgentsMemory) : undefined)),
    ),
  );
}

type ListItem = { type: string; path?: unknown };

/**
 * Page one listing to its end; every page request goes through `opts.limit`. Each page is
 * requested afresh from the previous page's cursor and dropped once its items are handed out, before
 * waiting on `onItem`'s backpressure, so a page's contents can be collected while the listing waits.
 */
async function pageAll(
  client: Anthropic,
  opts: ParallelListingOptions,
  query: { path_prefix: string; depth?: number },
  onItem: (item: ListItem) => Promise<void> | void,
): Promise<void> {
  const request = { signal: opts.signal, maxRetries: opts.readRetries, timeout: opts.requestTimeoutMs };
  const cursors = new Set<string>();
  let cursor: string | undefined;
  for (;;) {
    const params = { view: 'full' as const, limit: FULL_PAGE_LIMIT, ...query, ...(cursor !== undefined ? { page: cursor } : {}) };
    const { items, next } = await opts.limit(async () => {
      const page = await client.beta.memoryStores.memories.list(opts.storeId, params, request);
      return { items: page.data as ListItem[], next: page.data.length > 0 ? page.next_page : null };
    });
    let waiting: Promise<void> | undefined;
    for (const item of items) waiting = onItem(item) ?? waiting;
    items.length = 0;
    if (waiting !== undefined) await waiting;
    if (next === null || next === '') return;
    if (cursors.has(next)) {
      throw new ListingBoundError(`memory store ${opts.storeId}: the listing of ${query.path_prefix} repeated a cursor; the listing was stopped`);
    }
    cursors.add(next);
    cursor = next;
  }
}
