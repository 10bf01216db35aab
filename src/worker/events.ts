import type { MemoryEventMap } from '../memory/rules/types.js';
import type { FinishReport } from './memory-port.js';

/** How one work item ended. */
export type ItemStatus = 'completed' | 'skipped' | 'failed' | 'lease_lost' | 'stopped_by_server' | 'aborted';

/** How one work item ended, as `handleItem()` resolves and `sessionEnded` reports it. */
export interface ItemOutcome {
  /** The work item's id. */
  workId: string;
  /** The session's id, or undefined when the item ended before its session was known. */
  sessionId: string | undefined;
  /** How it ended. */
  status: ItemStatus;
  /** Why it failed, when `status` is `failed` (or another error ended it). */
  error?: Error;
  /**
   * Why a `completed` session ended otherwise than by its own end: `session_gone` when the API
   * refused to read it with a 404 (the session was deleted; its memory still got the final sync).
   */
  reason?: 'session_gone';
  /** Milliseconds from the start of the item's handling (its claim, or the `handleItem()` call) to the end of its teardown. */
  durationMs: number;
}

/**
 * The ids every memory event carries once the worker re-emits it.
 * @inline
 */
export interface ItemIds {
  /** The work item's id. */
  workId: string;
  /** The session's id. */
  sessionId: string;
}

/**
 * A memory event's payload with the ids of the item and session it belongs to.
 * @inline
 */
type WithIds<K extends keyof MemoryEventMap> = [MemoryEventMap[K][0] & ItemIds];

/** Names of the memory events the worker forwards. */
export const MEMORY_EVENT_NAMES = [
  'mounted',
  'mountProgress',
  'downloaded',
  'uploaded',
  'conflict',
  'deleted',
  'wouldDelete',
  'refused',
  'synced',
  'flushCutOff',
  'unmounted',
] as const satisfies ReadonlyArray<keyof MemoryEventMap>;

/** Events of {@link EnvironmentWorker}. Each carries one payload object, so fields can be added later. */
export interface WorkerEventMap {
  /** Every successful poll, empty or not. */
  polled: [
    {
      /** The id of the work item the poll returned, or undefined for an empty poll. */
      workId: string | undefined;
    },
  ];
  /** A poll failed; the poller retries after a backoff. */
  pollFailed: [
    {
      /** Why the poll failed. */
      error: Error;
      /** Milliseconds until the next poll. */
      retryInMs: number;
    },
  ];
  /** A work item was claimed (acknowledged) by this worker. */
  workClaimed: [
    {
      /** The work item's id. */
      workId: string;
      /** The session's id, or undefined when it was not known yet. */
      sessionId: string | undefined;
      /** The environment the item belongs to. */
      environmentId: string;
    },
  ];
  /** The session's tools can run: `readyMs` is claim (or handleItem start) → first tool call possible. */
  sessionStarted: [
    {
      /** The work item's id. */
      workId: string;
      /** The session's id. */
      sessionId: string;
      /** Memory stores mounted for the session. */
      stores: number;
      /** Milliseconds from the claim (or the `handleItem()` call) until the first tool call could run. */
      readyMs: number;
    },
  ];
  /** A session's work item ended (its teardown done). */
  sessionEnded: [
    {
      /** The work item's id. */
      workId: string;
      /** The session's id. */
      sessionId: string;
      /** How the item ended. */
      outcome: ItemOutcome;
      /** What the end did to the session's memory; absent when its memory was off or never mounted. */
      flush?: FinishReport;
    },
  ];
  /** A work item failed; `sessionEnded` (when its session had started) and the item's outcome follow. */
  workFailed: [
    {
      /** The work item's id. */
      workId: string;
      /** The session's id, or undefined when it was not known yet. */
      sessionId: string | undefined;
      /** Why it failed. */
      error: Error;
    },
  ];
  /** A work item was stopped (its stop call made) at the end of its handling. */
  workStopped: [
    {
      /** The work item's id. */
      workId: string;
    },
  ];
  /** The lease on a work item was lost; the item is left to its new owner. */
  leaseLost: [
    {
      /** The work item's id. */
      workId: string;
      /** The session's id, or undefined when it was not known yet. */
      sessionId: string | undefined;
      /**
       * `lease_lost`: the server said the lease belongs to someone else; `assumed_lost`: no heartbeat
       * succeeded within the lease's TTL.
       */
      reason: 'lease_lost' | 'assumed_lost';
    },
  ];
  /** The session's sandbox egress proxy refused a connection: the host the tool asked for, and the rule. */
  egressRefused: [
    {
      /** The work item's id. */
      workId: string;
      /** The session's id. */
      sessionId: string;
      /** The host name or address the tool asked for. */
      host: string;
      /** The port it asked for. */
      port: number;
      /** The rule that refused it (`host-not-allowed`, `private`, `loopback`, …). */
      rule: string;
      /** The resolved address that was refused, when the refusal came after resolving the name. */
      address?: string;
    },
  ];
  /**
   * A session's sandbox reached one of its limits during a tool call (`limit` in its unit: MiB or
   * processes; `count`: OOM kills or refused forks during the call, 1 for a full tmpfs). The
   * agent's tool result says the same `message`.
   */
  sandboxLimitHit: [
    {
      /** The work item's id. */
      workId: string;
      /** The session's id. */
      sessionId: string;
      /** Which limit: `memory` (`memoryMiB`), `processes` (`maxProcesses`) or `tmp` (`tmpMiB`). */
      limit: 'memory' | 'processes' | 'tmp';
      /** The limit's value, in its unit (MiB or processes). */
      value: number;
      /** OOM kills or refused forks during the call; 1 for a full tmpfs. */
      count: number;
      /** What the agent's tool result says about it. */
      message: string;
    },
  ];
  /** `close()` was called (or the constructor's signal aborted): no more claims. */
  closing: [{}];
  /** The worker has closed: every item ended and the poller stopped. */
  closed: [{}];
  /** A memory store of a session is mounted. */
  mounted: WithIds<'mounted'>;
  /** A mount still downloading, every few seconds. */
  mountProgress: WithIds<'mountProgress'>;
  /** A memory was written to its local file from the store. */
  downloaded: WithIds<'downloaded'>;
  /** A local file was written to the store. */
  uploaded: WithIds<'uploaded'>;
  /** A file changed both here and in the store: the store's version won, the local one was copied aside. */
  conflict: WithIds<'conflict'>;
  /** A deletion was carried over to the store or to the local folder. */
  deleted: WithIds<'deleted'>;
  /** A local deletion that `memorySyncDeletions: 'log_only'` kept from reaching the store. */
  wouldDelete: WithIds<'wouldDelete'>;
  /** A local change that was not uploaded. */
  refused: WithIds<'refused'>;
  /** A sync finished, of one store or of all the session's stores. */
  synced: WithIds<'synced'>;
  /** The session's final sync or flush ran out of its bound (`finalFlushMs`). */
  flushCutOff: WithIds<'flushCutOff'>;
  /** A store's folder was removed at the session's end, or kept. */
  unmounted: WithIds<'unmounted'>;
}

/** Emits one worker event; a throwing listener is logged, never thrown. */
export type WorkerEmit = <K extends keyof WorkerEventMap>(name: K, ...payload: WorkerEventMap[K]) => void;
