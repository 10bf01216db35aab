/**
 * The contract between the memory pieces (mounter, planner, sync loop) and the worker that drives
 * them. Plain data only: everything here can be serialised to JSON, so a later journal can persist
 * it and a crash-recovery pass can read it back.
 */

import type { SyncReport } from './sync-report.js';

export type { SyncReport };

/** What a local deletion may do on the server. */
export type MemoryDeleteMode = 'enabled' | 'log_only' | 'disabled';

/** Access a session grants to one attached store. */
export type MemoryAccess = 'read_write' | 'read_only';

/** One memory as the last successful sync left it on both sides: same bytes here and there. */
export interface BaselineEntry {
  /** The memory id (`mem_…`), stable across renames. */
  id: string;
  /** Lowercase hex SHA-256 of the content bytes. */
  sha: string;
}

/**
 * The sync state of one mounted store. Keys are store-relative POSIX paths without the leading
 * slash (`notes/todo.md`), exactly as the file sits below the mount root.
 */
export interface StoreSyncState {
  storeId: string;
  /** Absolute path of the folder the store is mounted at. */
  root: string;
  access: MemoryAccess;
  /** Number of completed syncs (download counts as 0). Pending deletes compare against it. */
  generation: number;
  baseline: Record<string, BaselineEntry>;
  /** Files missing locally whose remote delete waits for a later sync to confirm them still gone. */
  pendingDeletes: Record<string, PendingDelete>;
  /** Shas uploaded whose response may have been lost; a listing showing one is our own write. */
  sentShas: Record<string, string[]>;
  /** Local content versions the server (or our own checks) refused; retried only when the file changes. */
  refused: Record<string, { fingerprint: string; reason: string }>;
  /** Remote paths deliberately not materialised (case collisions, names this filesystem cannot hold). */
  shadowed: Record<string, { reason: string }>;
  /**
   * Pulls the folder could not hold (a file where a folder is needed, a folder where the file
   * goes, a symlink), by path → listed sha: each version is reported once. Absent when none.
   */
  blockedPulls?: Record<string, string>;
  /**
   * Files a stopped or timed-out tool call may have moved away (see `rules/restore-rule.ts`), by
   * path: while such a file is missing it is put back from the store, never deleted there. Absent
   * when none.
   */
  restore?: Record<string, RestoreMark>;
}

/** A file missing right after a tool call was stopped or timed out. */
export interface RestoreMark {
  /** Monotonic ms (this process's clock) of the scan that found it missing. */
  sinceMs: number;
}

/** A file seen missing locally whose remote delete waits for confirmation. */
export interface PendingDelete {
  /** Generation of the sync that first saw it missing. */
  sinceGeneration: number;
  /** Baseline sha of the missing file; the pending delete holds only while the baseline keeps it. */
  baseSha: string;
  /** Monotonic ms when it was first seen missing (this process's clock). */
  sinceMs?: number | undefined;
  /** In the journal only: how long it had been missing when the entry was written. */
  goneForMs?: number | undefined;
}

/** Payloads of the memory events. Every payload is one object, so fields can be added later. */
export interface MemoryEventMap {
  /** A store is mounted: `memories` files, `bytes` of them downloaded (0 for a store adopted from a leftover folder). */
  mounted: [{ storeId: string; root: string; memories: number; bytes: number; durationMs: number }];
  /** A mount still downloading, every few seconds: memories written so far. */
  mountProgress: [{ storeId: string; root: string; memories: number; elapsedMs: number }];
  downloaded: [{ storeId: string; path: string; sha: string }];
  uploaded: [{ storeId: string; path: string; sha: string; created: boolean }];
  conflict: [{ storeId: string; path: string; conflictCopy: string | undefined }];
  deleted: [{ storeId: string; path: string; side: 'local' | 'remote' }];
  wouldDelete: [{ storeId: string; path: string }];
  refused: [{ storeId: string; path: string; reason: string }];
  synced: [{ storeId: string | undefined; report: SyncReport; phase: 'sync' | 'final' | 'flush' }];
  flushCutOff: [{ phase: 'final' | 'flush'; boundMs: number; pendingUploads: number }];
  unmounted: [{ storeId: string; root: string; removed: boolean; reason?: string }];
}
