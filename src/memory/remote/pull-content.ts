import type { Logger } from '../../internal/logger.js';
import type { ContentCache } from '../disk/content-cache.js';
import type { RemoteMemory, RemoteStore } from './remote-store.js';

/** A pulled memory's content: copied from the cache (`cached`, hashed to `sha` as it was read) or fetched. */
export interface PulledContent {
  id: string;
  sha: string;
  bytes: Buffer;
  updatedAt: string | undefined;
  cached: boolean;
}

/**
 * The content a sync pull writes: the cached bytes of the listed sha when the cache holds them
 * (verified as read), else the memory fetched from the store (which may be newer than the
 * listing). Throws what `retrieve` throws.
 */
export async function pullContent(
  remote: RemoteStore,
  contents: ContentCache | undefined,
  action: { id: string; sha: string },
  listed: RemoteMemory | undefined,
  signal: AbortSignal,
  log?: Logger,
): Promise<PulledContent> {
  if (contents !== undefined && (await contents.open())) {
    const bytes = contents.read(action.sha, log);
    if (bytes !== undefined) return { id: action.id, sha: action.sha, bytes, updatedAt: listed?.updatedAt, cached: true };
  }
  const m = await remote.retrieve(action.id, signal);
  return { id: m.id, sha: m.sha, bytes: Buffer.from(m.content, 'utf8'), updatedAt: m.updatedAt, cached: false };
}
