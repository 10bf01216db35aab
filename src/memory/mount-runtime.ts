import type { Logger } from '../internal/logger.js';
import type { LocalDir } from './local-dir.js';
import type { StatCache } from './stat-cache.js';
import type { MountedSession, MountedStore } from './mounted.js';

/**
 * What a mount keeps beside the public handle: the hardened folder access, the stat cache filled
 * by the download, and whether the filesystem folds case. The SyncLoop finds it through
 * {@link runtimeOf}; a handle not made by MemoryMounter (rebuilt from a journal) gets fresh ones.
 */
export interface StoreRuntime {
  dir: LocalDir;
  cache: StatCache;
  caseInsensitive: boolean;
  log: Logger;
  /** Paths already warned about as symlinks/FIFOs/…, so each is warned once. */
  warnedSkips: Set<string>;
}

export interface SessionRuntime {
  /** Set by unmount: from then on nothing touches the folders. */
  disposed: boolean;
  stores: Map<MountedStore, StoreRuntime>;
  /** Unmount, reporting which roots were removed and which were kept. Idempotent. */
  unmount(): Promise<{ removed: string[]; kept: string[] }>;
}

const runtimes = new WeakMap<MountedSession, SessionRuntime>();

export function attachRuntime(session: MountedSession, runtime: SessionRuntime): void {
  runtimes.set(session, runtime);
}

export function runtimeOf(session: MountedSession): SessionRuntime | undefined {
  return runtimes.get(session);
}
