/**
 * The contract between the memory pieces (mounter, planner, sync loop) and the worker that drives
 * them. Plain data only: everything here can be serialised to JSON, so a later journal can persist
 * it and a crash-recovery pass can read it back.
 */

import type { SyncReport } from './sync-report.js';

export type { SyncReport };

/**
 * What a local deletion may do on the server.
 * @inline
 */
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
  mounted: [
    {
      /** The memory store's id. */
      storeId: string;
      /** The folder it is mounted at. */
      root: string;
      /** Memories (files) in the folder. */
      memories: number;
      /** Bytes downloaded to fill it. */
      bytes: number;
      /** Milliseconds the mount took. */
      durationMs: number;
    },
  ];
  /** A mount still downloading, every few seconds: memories written so far. */
  mountProgress: [
    {
      /** The memory store's id. */
      storeId: string;
      /** The folder being filled. */
      root: string;
      /** Memories written so far. */
      memories: number;
      /** Milliseconds since the mount started. */
      elapsedMs: number;
    },
  ];
  /** A memory was written to its local file from the store. */
  downloaded: [
    {
      /** The memory store's id. */
      storeId: string;
      /** The file's path relative to the store's folder. */
      path: string;
      /** Lowercase hex SHA-256 of the content written. */
      sha: string;
    },
  ];
  /** A local file was written to the store. */
  uploaded: [
    {
      /** The memory store's id. */
      storeId: string;
      /** The file's path relative to the store's folder. */
      path: string;
      /** Lowercase hex SHA-256 of the content uploaded. */
      sha: string;
      /** True when the upload created the memory, false when it updated one. */
      created: boolean;
    },
  ];
  /** A file changed both here and in the store: the store's version won, the local one was copied aside. */
  conflict: [
    {
      /** The memory store's id. */
      storeId: string;
      /** The file's path relative to the store's folder. */
      path: string;
      /** Where the local version was copied, or undefined when no copy could be kept. */
      conflictCopy: string | undefined;
    },
  ];
  /** A deletion was carried over: a memory deleted from the store (`remote`) or a local file removed (`local`). */
  deleted: [
    {
      /** The memory store's id. */
      storeId: string;
      /** The file's path relative to the store's folder. */
      path: string;
      /** Which side the deletion was made on. */
      side: 'local' | 'remote';
    },
  ];
  /** A local deletion that `memorySyncDeletions: 'log_only'` kept from reaching the store. */
  wouldDelete: [
    {
      /** The memory store's id. */
      storeId: string;
      /** The file's path relative to the store's folder. */
      path: string;
    },
  ];
  /** A local change that was not uploaded (a binary or oversized file, a reserved name, an edit in a read-only store). */
  refused: [
    {
      /** The memory store's id. */
      storeId: string;
      /** The file's path relative to the store's folder. */
      path: string;
      /** Why it was refused. */
      reason: string;
    },
  ];
  /** A sync finished: of one store, or of all the session's stores together (`storeId` undefined). */
  synced: [
    {
      /** The memory store's id, or undefined for the total over all stores. */
      storeId: string | undefined;
      /** What the sync did. */
      report: SyncReport;
      /** `sync` for a periodic sync, `final` for the one at the session's end, `flush` for the push-only flush after it. */
      phase: 'sync' | 'final' | 'flush';
    },
  ];
  /** The session's final sync or flush ran out of its bound (`finalFlushMs`) before it was done. */
  flushCutOff: [
    {
      /** The phase that was cut off. */
      phase: 'final' | 'flush';
      /** The bound, in milliseconds. */
      boundMs: number;
      /** Local changes that were not uploaded. */
      pendingUploads: number;
    },
  ];
  /** A store's folder was removed at the session's end, or kept (`removed` false, `reason` says why). */
  unmounted: [
    {
      /** The memory store's id. */
      storeId: string;
      /** The store's folder. */
      root: string;
      /** True when the folder was removed. */
      removed: boolean;
      /** Why the folder was kept, when it was. */
      reason?: string;
    },
  ];
}
