/**
 * The slice of the memory core the worker drives, as narrow interfaces: the per-item flow depends on
 * these, and `defaultMemoryPort` binds them to `MemoryMounter` / `SyncLoop` from `src/memory/`.
 */
import type { EventEmitter } from 'node:events';
import type Anthropic from '@anthropic-ai/sdk';
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';
import type { Logger } from '../internal/logger.js';
import type { MemoryAccess, MemoryDeleteMode, MemoryEventMap, SyncReport } from '../memory/rules/types.js';
import type { StoreWrapper } from '../memory/mount/mounter.js';
import type { SyncWrapper } from '../memory/sync/sync-loop.js';
import type { ToolCallHooks } from './tool-guard.js';

export type { FinishReport } from '../memory/index.js';
export type { MemoryEventMap, StoreWrapper };
import type { FinishReport } from '../memory/index.js';

export interface MountedStoreView {
  storeId: string;
  root: string;
  access: MemoryAccess;
}

export interface MountedSessionView {
  sessionId: string;
  stores: MountedStoreView[];
  roots: string[];
  readOnlyRoots: string[];
  unmount(): Promise<unknown>;
}

export interface MounterView extends EventEmitter<MemoryEventMap> {
  mount(
    session: BetaManagedAgentsSession,
    opts?: {
      signal?: AbortSignal;
      workId?: string;
      wrapStore?: StoreWrapper;
      /** Called once every store's folder exists, before the contents are written. */
      onRoots?: (roots: { all: string[]; readOnly: string[] }) => void;
      /** Read-only stores' cached files as hard links to the cache: only where no agent can write in those folders. */
      linkReadOnly?: boolean;
    },
  ): Promise<MountedSessionView>;
}

export interface SyncLoopView extends EventEmitter<MemoryEventMap>, ToolCallHooks {
  finish(opts: { clean: boolean; signal?: AbortSignal }): Promise<FinishReport>;
  /** The session went idle (the agent's turn ended): push changed files now. Optional; never throws. */
  sessionIdle?(): void;
}

export interface MemoryPort {
  /**
   * At `run()` start: drop journal entries of dead workers with nothing left to save and name each
   * leftover folder still waiting (see `sweepJournal`). Optional: a port without journal skips it.
   */
  sweep?(opts: { logger: Logger; stateDir?: string | undefined }): Promise<unknown>;
  mounter(opts: {
    client: Anthropic;
    logger: Logger;
    workdir: string;
    stateDir?: string | undefined;
    contentCacheBytes?: number;
    allowedMountRoots?: readonly string[];
    mountTimeoutMs?: number;
    deletions?: MemoryDeleteMode;
    deleteAfterMs?: number;
    /** Memory content one mount holds at once, in bytes. */
    bufferBytes?: number;
  }): MounterView;
  syncLoop(opts: {
    client: Anthropic;
    mounted: MountedSessionView;
    intervalMs: number;
    deletions: MemoryDeleteMode;
    finalFlushMs: number;
    deleteAfterMs?: number;
    logger: Logger;
    stateDir?: string | undefined;
    contentCacheBytes?: number;
    wrapSync?: SyncWrapper | undefined;
  }): SyncLoopView;
}
