import { ApiError, conflict, notFound } from '../errors.js';
import { isoTime, newId, randomToken } from '../ids.js';

/**
 * Where a work item is in its life: `queued` (waiting for a poll, or handed out and not acknowledged
 * yet), `starting` (acknowledged), `active` (heartbeating), `stopping` (a stop was asked for),
 * `stopped`.
 */
export type WorkState = 'queued' | 'starting' | 'active' | 'stopping' | 'stopped';
/**
 * What a work item asks for: a session to run, or a health check.
 * @inline
 */
export type WorkData =
  | {
      /** A session to run. */
      type: 'session';
      /** The session's id. */
      id: string;
    }
  | {
      /** A health check of the environment's workers. */
      type: 'healthcheck';
      /** The check's id. */
      id: string;
    };

export const NO_HEARTBEAT = 'NO_HEARTBEAT';

/** One work item as the emulator keeps it. */
export interface WorkItem {
  id: string;
  environmentId: string;
  data: WorkData;
  state: WorkState;
  metadata: Record<string, string>;
  /** Per-item credential; `null` when the item was created with `secret: false`. */
  sessionsToken: string | null;
  createdAtMs: number;
  acknowledgedAt: string | null;
  startedAt: string | null;
  latestHeartbeatAt: string | null;
  stopRequestedAt: string | null;
  stoppedAt: string | null;
  /** When a poll last handed the item out without an ack (ms), or `null`. */
  deliveredAtMs: number | null;
  /** How many times a poll handed the item out. */
  deliveries: number;
  /** The lease: last heartbeat value echoed by its holder, and when it lapses. */
  lastHeartbeat: string | null;
  leaseTtlSeconds: number;
  leaseExpiresAtMs: number | null;
  /** Set by the `leaseLost` fault / `loseLease()`: the next heartbeat answers 412. */
  forceLeaseLost: boolean;
  heartbeats: number;
}

/** Wire shape `BetaSelfHostedWork`. */
export interface WorkObject {
  /** The work item's id. */
  id: string;
  /** Always `work`. */
  type: 'work';
  /** The environment whose queue holds it. */
  environment_id: string;
  /** What the item asks for. */
  data: WorkData;
  /** Where the item is in its life. */
  state: WorkState;
  /** The per-item credential (base64url JSON with a `sessions_token`), or `null` for an item created without one. */
  secret: string | null;
  /** The item's metadata. */
  metadata: Record<string, string>;
  /** ISO time the item was queued. */
  created_at: string;
  /** ISO time of its acknowledgement (or first heartbeat), or `null`. */
  acknowledged_at: string | null;
  /** ISO time of its first heartbeat, or `null`. */
  started_at: string | null;
  /** ISO time of its latest heartbeat, or `null`. */
  latest_heartbeat_at: string | null;
  /** ISO time a stop was first asked for, or `null`. */
  stop_requested_at: string | null;
  /** ISO time it was stopped, or `null`. */
  stopped_at: string | null;
}

/** Wire shape `BetaSelfHostedWorkHeartbeatResponse`. */
export interface HeartbeatObject {
  /** Always `work_heartbeat`. */
  type: 'work_heartbeat';
  /** ISO time of this heartbeat; when the lease was not extended, of the last one that was (`''` when none was). */
  last_heartbeat: string;
  /** Seconds the lease lasts from this heartbeat. */
  ttl_seconds: number;
  /** The item's state after the heartbeat. */
  state: WorkState;
  /** True when the heartbeat extended the lease; false when the item is stopping or stopped (the worker winds down). */
  lease_extended: boolean;
}

/** The base64url `secret` payload for a sessions token. */
export function encodeWorkSecret(sessionsToken: string): string {
  return Buffer.from(JSON.stringify({ sessions_token: sessionsToken }), 'utf8').toString('base64url');
}

export interface WorkQueueOptions {
  leaseTtlSeconds: number;
  reclaimOlderThanMs: number;
  onChange: (item: WorkItem) => void;
}

/**
 * The work queues of every environment: enqueue, long-poll delivery with reclaim of un-acked
 * items and of lapsed leases, ack, heartbeat with optimistic lease concurrency, stop.
 */
export class WorkQueue {
  readonly #items = new Map<string, WorkItem>();
  readonly #waiters = new Set<() => void>();
  readonly #opts: WorkQueueOptions;
  #lastBeatMs = 0;

  constructor(opts: WorkQueueOptions) {
    this.#opts = opts;
  }

  all(): WorkItem[] {
    return [...this.#items.values()];
  }

  find(workId: string): WorkItem | undefined {
    return this.#items.get(workId);
  }

  get(environmentId: string, workId: string): WorkItem {
    const item = this.#items.get(workId);
    if (!item || item.environmentId !== environmentId) {
      throw notFound(`work item ${workId} does not exist in environment ${environmentId}`);
    }
    return item;
  }

  enqueue(environmentId: string, data: WorkData, withSecret: boolean): WorkItem {
    const item: WorkItem = {
      id: newId('work'),
      environmentId,
      data,
      state: 'queued',
      metadata: {},
      sessionsToken: withSecret ? `sk-ant-req-${randomToken(40)}` : null,
      createdAtMs: Date.now(),
      acknowledgedAt: null,
      startedAt: null,
      latestHeartbeatAt: null,
      stopRequestedAt: null,
      stoppedAt: null,
      deliveredAtMs: null,
      deliveries: 0,
      lastHeartbeat: null,
      leaseTtlSeconds: this.#opts.leaseTtlSeconds,
      leaseExpiresAtMs: null,
      forceLeaseLost: false,
      heartbeats: 0,
    };
    this.#items.set(item.id, item);
    this.#changed(item);
    return item;
  }

  toObject(item: WorkItem, withSecret = false): WorkObject {
    return {
      id: item.id,
      type: 'work',
      environment_id: item.environmentId,
      data: { ...item.data },
      state: item.state,
      secret: withSecret && item.sessionsToken !== null ? encodeWorkSecret(item.sessionsToken) : null,
      metadata: { ...item.metadata },
      created_at: isoTime(item.createdAtMs),
      acknowledged_at: item.acknowledgedAt,
      started_at: item.startedAt,
      latest_heartbeat_at: item.latestHeartbeatAt,
      stop_requested_at: item.stopRequestedAt,
      stopped_at: item.stoppedAt,
    };
  }

  /** The next deliverable item of the environment, marked delivered; `undefined` when none. */
  take(environmentId: string, reclaimOlderThanMs: number | undefined): WorkItem | undefined {
    const now = Date.now();
    const reclaimMs = reclaimOlderThanMs ?? this.#opts.reclaimOlderThanMs;
    for (const item of this.#items.values()) {
      if (item.environmentId !== environmentId) continue;
      if (item.state === 'stopping' && item.leaseExpiresAtMs !== null && now > item.leaseExpiresAtMs) {
        // Nobody wound it down within the lease: the stop completes on its own.
        item.state = 'stopped';
        item.stoppedAt = isoTime(now);
        this.#changed(item);
        continue;
      }
      const fresh = item.state === 'queued' && (item.deliveredAtMs === null || now - item.deliveredAtMs >= reclaimMs);
      const lapsed =
        (item.state === 'starting' || item.state === 'active') && item.leaseExpiresAtMs !== null && now > item.leaseExpiresAtMs;
      if (!fresh && !lapsed) continue;
      if (lapsed) {
        // The holder stopped heartbeating: the item goes back to the queue and its lease is void,
        // so a late heartbeat from the old holder is refused with 412.
        item.state = 'queued';
        item.lastHeartbeat = null;
        item.leaseExpiresAtMs = null;
      }
      item.deliveredAtMs = now;
      item.deliveries++;
      this.#changed(item);
      return item;
    }
    return undefined;
  }

  /** Wait up to `blockMs` for a deliverable item; resolves `undefined` on timeout or `signal`. */
  async poll(
    environmentId: string,
    opts: { blockMs: number; reclaimOlderThanMs: number | undefined; signal: AbortSignal },
  ): Promise<WorkItem | undefined> {
    const deadline = Date.now() + opts.blockMs;
    for (;;) {
      const item = this.take(environmentId, opts.reclaimOlderThanMs);
      if (item) return item;
      const remaining = deadline - Date.now();
      if (remaining <= 0 || opts.signal.aborted) return undefined;
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          this.#waiters.delete(done);
          opts.signal.removeEventListener('abort', done);
          resolve();
        };
        // Re-check now and then: reclaim deadlines pass without any event.
        const timer = setTimeout(done, Math.min(remaining, 50));
        this.#waiters.add(done);
        opts.signal.addEventListener('abort', done, { once: true });
      });
    }
  }

  ack(item: WorkItem): WorkItem {
    if (item.state === 'stopped' || item.state === 'stopping') {
      throw conflict(`work item ${item.id} is ${item.state}; it can no longer be acknowledged`);
    }
    if (item.state === 'queued') {
      item.state = 'starting';
      item.acknowledgedAt = isoTime();
      item.deliveredAtMs = null;
      // The lease starts now; the holder's first heartbeat claims it.
      item.leaseExpiresAtMs = Date.now() + item.leaseTtlSeconds * 1000;
      this.#changed(item);
    }
    return item;
  }

  heartbeat(item: WorkItem, expected: string | undefined, desiredTtlSeconds: number | undefined): HeartbeatObject {
    if (item.state === 'stopping' || item.state === 'stopped') {
      // The value is not compared here (API docs). A stop request ends the lease: the answer says
      // `lease_extended: false` (what the SDK reads as "shut down" since 1.16; 1.14 also reads the
      // `state`), and the lease is not extended, so a `stopping` item nobody stops becomes
      // `stopped` once the lease it had lapses.
      return {
        type: 'work_heartbeat',
        last_heartbeat: item.lastHeartbeat ?? '',
        ttl_seconds: item.leaseTtlSeconds,
        state: item.state,
        lease_extended: false,
      };
    }
    const expectedValue = expected ?? NO_HEARTBEAT;
    const matches =
      !item.forceLeaseLost && (item.lastHeartbeat === null ? expectedValue === NO_HEARTBEAT : expectedValue === item.lastHeartbeat);
    if (!matches) {
      item.forceLeaseLost = false;
      throw new ApiError(
        412,
        'invalid_request_error',
        `heartbeat precondition failed for work item ${item.id}: expected_last_heartbeat ` +
          `${JSON.stringify(expectedValue)} does not match the lease; another worker holds it`,
        {
          details: {
            error_code: 'heartbeat_precondition_failed',
            current_state: {
              state: item.state,
              last_heartbeat: item.lastHeartbeat,
              lease_extended: false,
              ttl_seconds: item.leaseTtlSeconds,
            },
          },
        },
      );
    }
    const nowMs = Math.max(Date.now(), this.#lastBeatMs + 1);
    this.#lastBeatMs = nowMs;
    if (desiredTtlSeconds !== undefined) item.leaseTtlSeconds = desiredTtlSeconds;
    item.lastHeartbeat = isoTime(nowMs);
    item.latestHeartbeatAt = item.lastHeartbeat;
    item.leaseExpiresAtMs = nowMs + item.leaseTtlSeconds * 1000;
    item.heartbeats++;
    if (item.state === 'queued' || item.state === 'starting') {
      item.state = 'active';
      item.startedAt ??= item.lastHeartbeat;
      item.acknowledgedAt ??= item.lastHeartbeat;
      item.deliveredAtMs = null;
    }
    this.#changed(item);
    return {
      type: 'work_heartbeat',
      last_heartbeat: item.lastHeartbeat,
      ttl_seconds: item.leaseTtlSeconds,
      state: item.state,
      lease_extended: true,
    };
  }

  /** Void the current lease so the holder's next heartbeat gets 412 (another worker "took" it). */
  loseLease(item: WorkItem): void {
    item.forceLeaseLost = true;
    this.#changed(item);
  }

  stop(item: WorkItem, force: boolean): WorkItem {
    if (item.state === 'stopped') {
      throw conflict(`work item ${item.id} is already stopped`);
    }
    const now = isoTime();
    item.stopRequestedAt ??= now;
    // Nobody holds an un-acked item, so there is nobody to wind it down gracefully.
    if (force || item.state === 'queued') {
      item.state = 'stopped';
      item.stoppedAt = now;
      item.deliveredAtMs = null;
    } else {
      item.state = 'stopping';
    }
    this.#changed(item);
    return item;
  }

  updateMetadata(item: WorkItem, patch: Record<string, string | null>): WorkItem {
    for (const [key, value] of Object.entries(patch)) {
      if (value === null) delete item.metadata[key];
      else item.metadata[key] = value;
    }
    this.#changed(item);
    return item;
  }

  /** Wake every long poll (an item was added, or the server is closing). */
  wakeAll(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }

  #changed(item: WorkItem): void {
    this.wakeAll();
    this.#opts.onChange(item);
  }
}
