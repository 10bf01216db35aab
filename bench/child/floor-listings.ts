/**
 * The network floor of a mount: a bare SDK client fetches every memory of the given stores with
 * content and does nothing else: the stores in parallel, each one listed once at depth 1 (its
 * top-level memories and folders), then every top-level folder paged in full view on its own
 * cursor, at most `concurrency` requests in flight per store (or, with `oneCursor`, each store
 * paged whole on one cursor: the least any client can do for a single folder). Nothing is kept;
 * with `writeTo`, each memory is written once as it arrives, with a plain synchronous write (the
 * folder made once): the floor of a mount that must also create every file.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import pLimit from 'p-limit';
import type { ChildConfig, FloorConfig } from './protocol.js';

export async function pageListings(config: ChildConfig, floor: Extract<FloorConfig, { kind: 'listings' }>): Promise<void> {
  const client = new Anthropic({ apiKey: null, authToken: floor.sessionsToken, baseURL: config.baseURL, logLevel: 'off' });

  async function pageAll(
    storeId: string,
    query: { path_prefix: string; depth?: number },
    onItem: (item: { type: string; path: string; content?: string | null }) => void,
  ): Promise<void> {
    let page = await client.beta.memoryStores.memories.list(storeId, { view: 'full', limit: 20, ...query });
    for (;;) {
      for (const item of page.data) onItem(item);
      if (!page.hasNextPage()) return;
      page = await page.getNextPage();
    }
  }

  async function fetchStore(storeId: string, index: number): Promise<number> {
    let bytes = 0;
    const root = floor.writeTo !== undefined ? path.join(floor.writeTo, String(index)) : undefined;
    const made = new Set<string>();
    const take = (item: { type: string; path: string; content?: string | null }): void => {
      bytes += item.content?.length ?? 0;
      if (root === undefined || item.type !== 'memory') return;
      const file = path.join(root, item.path);
      const dir = path.dirname(file);
      if (!made.has(dir)) {
        fs.mkdirSync(dir, { recursive: true });
        made.add(dir);
      }
      fs.writeFileSync(file, item.content ?? '');
    };
    if (floor.oneCursor === true) {
      await pageAll(storeId, { path_prefix: '/' }, take);
      return bytes;
    }
    const folders: string[] = [];
    await pageAll(storeId, { path_prefix: '/', depth: 1 }, (item) => {
      if (item.type === 'memory_prefix') folders.push(item.path);
      else take(item);
    });
    const limit = pLimit(floor.concurrency);
    await Promise.all(folders.map((prefix) => limit(() => pageAll(storeId, { path_prefix: prefix }, take))));
    return bytes;
  }

  await Promise.all(floor.storeIds.map((id, i) => fetchStore(id, i)));
}
