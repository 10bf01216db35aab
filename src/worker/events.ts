import type { MemoryEventMap } from '../memory/rules/types.js';
import type { FinishReport } from './memory-port.js';

/** How one work item ended. */
export type ItemStatus = 'completed' | 'skipped' | 'failed' | 'lease_lost' | 'stopped_by_server' | 'aborted';

export interface ItemOutcome {
  workId: string;
  sessionId: string | undefined;
  status: ItemStatus;
  error?: Error;
  /**
   * Why a `completed` session ended otherwise than by its own end: `session_gone` when the API
   * refused to read it with a 404 (the session was deleted; its memory still got the final sync).
   */
  reason?: 'session_gone';
  durationMs: number;
}

/** The ids every memory event carries once the worker re-emits it. */
export interface ItemIds {
  workId: string;
  sessionId: string;
}

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
  polled: [{ workId: string | undefined }];
  pollFailed: [{ error: Error; retryInMs: number }];
  workClaimed: [{ workId: string; sessionId: string | undefined; environmentId: string }];
  /** The session's tools can run: `readyMs` is claim (or handleItem start) → first tool call possible. */
  sessionStarted: [{ workId: string; sessionId: string; stores: number; readyMs: number }];
  sessionEnded: [{ workId: string; sessionId: string; outcome: ItemOutcome; flush?: FinishReport }];
  workFailed: [{ workId: string; sessionId: string | undefined; error: Error }];
  workStopped: [{ workId: string }];
  leaseLost: [{ workId: string; sessionId: string | undefined; reason: 'lease_lost' | 'assumed_lost' }];
  /** The session's sandbox egress proxy refused a connection: the host the tool asked for, and the rule. */
  egressRefused: [{ workId: string; sessionId: string; host: string; port: number; rule: string; address?: string }];
  /**
   * A session's sandbox reached one of its limits during a tool call (`limit` in its unit: MiB or
   * processes; `count`: OOM kills or refused forks during the call, 1 for a full tmpfs). The
   * agent's tool result says the same `message`.
   */
  sandboxLimitHit: [
    { workId: string; sessionId: string; limit: 'memory' | 'processes' | 'tmp'; value: number; count: number; message: string },
  ];
  closing: [{}];
  closed: [{}];
  mounted: WithIds<'mounted'>;
  mountProgress: WithIds<'mountProgress'>;
  downloaded: WithIds<'downloaded'>;
  uploaded: WithIds<'uploaded'>;
  conflict: WithIds<'conflict'>;
  deleted: WithIds<'deleted'>;
  wouldDelete: WithIds<'wouldDelete'>;
  refused: WithIds<'refused'>;
  synced: WithIds<'synced'>;
  flushCutOff: WithIds<'flushCutOff'>;
  unmounted: WithIds<'unmounted'>;
}

/** Emits one worker event; a throwing listener is logged, never thrown. */
export type WorkerEmit = <K extends keyof WorkerEventMap>(name: K, ...payload: WorkerEventMap[K]) => void;
