import type { LimitFunction } from 'p-limit';
import { statusOf } from '../../api/classify.js';
import type { PageGate } from './page-budget.js';
import { MAX_MEMORY_BYTES } from '../disk/local-dir.js';
import {
  dropContent,
  FULL_PAGE_LIMIT,
  type ListedMemoryWithContent,
  type RemoteMemory,
  type RemoteMemoryWithContent,
  type RemoteStore,
} from './remote-store.js';

/**
 * The memories a warm mount listed (basic view) but found no cached content for, fetched the
 * cheaper of two ways per top-level part of the store (a folder `/name/`, or the top-level memories
 * `/`):
 * - one by one (`retrieve`, as many in flight as the limiter lets run) while they are few: at most
 *   twice the pages a full listing of that part takes, so the requests stay within twice what the
 *   cold download of that part would send, in fewer round trips;
 * - else by listing that part in the full view on one cursor, as a cold mount does, and keeping the
 *   memories that were missed (the others are copied from the cache already).
 * A memory gone (404) or moved since the basic listing is left out: the first sync finds it.
 * With `gate`, the contents fetched count in the mount's bytes of pages in flight: a part's listing
 * as a cold listing's pages do, and each memory retrieved for its listed size (its real one once
 * read) from before its request until it was handed on.
 */

/** The top-level part of a server path: `/name/` for a path below a folder, `/` for a top-level memory. */
export function partOf(serverPath: string): string {
  const i = serverPath.indexOf('/', 1);
  return i < 0 ? '/' : serverPath.slice(0, i + 1);
}

/** How a part's misses are fetched: `retrieve` while they are at most twice a full listing's pages. */
export function missPlan(misses: number, partSize: number): 'retrieve' | 'list' {
  return misses <= 2 * Math.ceil(partSize / FULL_PAGE_LIMIT) ? 'retrieve' : 'list';
}

export interface Miss {
  m: RemoteMemory;
  rel: string;
}

export interface FetchMissesOptions {
  remote: RemoteStore;
  misses: readonly Miss[];
  /** Memories listed per part; without it every miss is retrieved one by one. */
  partSizes?: ReadonlyMap<string, number>;
  signal: AbortSignal;
  /** Bounds the requests in flight. */
  limit: LimitFunction;
  /** Bounds, in bytes, the contents fetched and not yet handed on. */
  gate?: PageGate;
  /** A fetched memory for the path it was listed at. */
  onContent(m: ListedMemoryWithContent, rel: string): Promise<void> | void;
  /** A memory refused (content over the size limit). */
  onRefused(m: RemoteMemory, reason: string): void;
}

/** Fetch every miss as described above; throws the first failure (the mount fails as a cold one does). */
export async function fetchMisses(o: FetchMissesOptions): Promise<void> {
  const byPart = new Map<string, Miss[]>();
  for (const miss of o.misses) {
    const part = partOf(miss.m.path);
    let list = byPart.get(part);
    if (list === undefined) byPart.set(part, (list = []));
    list.push(miss);
  }
  const jobs: Promise<void>[] = [];
  for (const [part, list] of byPart) {
    const size = o.partSizes?.get(part);
    if (size !== undefined && missPlan(list.length, size) === 'list') {
      const wanted = new Map(list.map((miss) => [miss.m.path, miss.rel]));
      jobs.push(
        o.limit(() =>
          o.remote.listPartFull(
            part,
            o.signal,
            (m) => {
              const rel = wanted.get(m.path);
              if (rel !== undefined) return o.onContent(m, rel);
              dropContent(m.content);
              return undefined;
            },
            (m, reason) => {
              if (wanted.has(m.path)) o.onRefused(m, reason);
            },
            o.gate,
          ),
        ),
      );
      continue;
    }
    for (const miss of list) jobs.push(o.limit(() => retrieveOne(o, miss)));
  }
  const settled = await Promise.allSettled(jobs);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}

async function retrieveOne(o: FetchMissesOptions, miss: Miss): Promise<void> {
  if (o.signal.aborted) return;
  const budget = o.gate?.budget;
  // The listed size is a hint from the server: the grant is corrected to the content read.
  let held = Math.max(0, Math.min(MAX_MEMORY_BYTES, Number.isFinite(miss.m.sizeBytes) ? miss.m.sizeBytes : 0));
  if (budget !== undefined) await budget.take(held, o.signal);
  try {
    let m: RemoteMemoryWithContent;
    try {
      m = await o.remote.retrieve(miss.m.id, o.signal);
    } catch (e) {
      if (statusOf(e) === 404) return;
      throw e;
    }
    if (budget !== undefined) {
      budget.resize(held, m.content.length);
      held = m.content.length;
    }
    if (m.path !== miss.m.path) return;
    await o.onContent(m, miss.rel);
  } finally {
    if (budget !== undefined && held > 0) budget.give(held);
  }
}
