import type { BetaSelfHostedWorkHeartbeatResponse } from '@anthropic-ai/sdk/resources/beta/environments/work';
import { classifyFailure, isApiError, statusOf } from '../api/classify.js';
import { sleepUnlessAborted } from '../internal/abort.js';
import { monotonicClock, type CancelTimer, type TimerClock } from '../internal/clock.js';
import { errorSummary, type Logger } from '../internal/logger.js';

/** The sentinel the first heartbeat sends to claim an unclaimed lease. */
export const NO_HEARTBEAT = 'NO_HEARTBEAT';
/** Interval before the server has told us its TTL. */
export const HEARTBEAT_INTERVAL_DEFAULT_MS = 30_000;
/** TTL assumed before the first successful beat. */
export const LEASE_TTL_DEFAULT_MS = 90_000;
/** Shortest interval between beats, whatever the TTL. */
export const HEARTBEAT_INTERVAL_FLOOR_MS = 1_000;
/** Shortest wait before retrying a failed beat (retries run at half the time left before the deadline). */
export const HEARTBEAT_RETRY_FLOOR_MS = 250;

/**
 * Why heartbeating ended. The first reason recorded wins.
 * - `done`: the session is over and the worker let go of the lease itself.
 * - `server_stop`: the server answered `stopping`/`stopped`, or did not extend the lease (any
 *   `lease_extended` but `true`).
 * - `lease_lost`: 412: the lease belongs to someone else now.
 * - `rejected`: a permanent 4xx other than 412 (401, 404, …).
 * - `assumed_lost`: no successful beat within the TTL.
 */
export type LeaseEndReason = 'done' | 'server_stop' | 'lease_lost' | 'rejected' | 'assumed_lost';

/** The one call the lease needs: a narrow interface so unit tests can pass a plain object. */
export interface HeartbeatApi {
  heartbeat(
    workId: string,
    params: { environment_id: string; expected_last_heartbeat: string },
    options: { signal: AbortSignal },
  ): Promise<Pick<BetaSelfHostedWorkHeartbeatResponse, 'last_heartbeat' | 'ttl_seconds' | 'state' | 'lease_extended'>>;
}

export interface LeaseOptions {
  api: HeartbeatApi;
  workId: string;
  environmentId: string;
  logger: Logger;
  /** Time source of the beat interval, the beat cut-off and the TTL deadline. Default: the process's monotonic clock. */
  clock?: TimerClock;
  /** Called with the server's TTL after every successful beat that reports one. */
  onTtl?: (ttlMs: number) => void;
  /** @internal test tuning */
  timing?: { defaultIntervalMs?: number; defaultTtlMs?: number; floorMs?: number };
}

/** Beat interval for a lease TTL: half the TTL, at least the floor, at most the default. */
export function heartbeatIntervalMs(ttlMs: number, floorMs = HEARTBEAT_INTERVAL_FLOOR_MS, capMs = HEARTBEAT_INTERVAL_DEFAULT_MS): number {
  return Math.max(floorMs, Math.min(ttlMs / 2, capMs));
}

/**
 * Keeps one work item's lease alive while its session is served.
 *
 * Rules: the first beat sends `NO_HEARTBEAT` and claims the item: {@link Lease.claimed} settles with
 * its verdict, and nothing of the item may run before it says `true`; a first beat refused for good
 * (412 or any other permanent 4xx) means the item was never ours, so it must not be stopped
 * ({@link Lease.lost}). Every later beat echoes the previous answer's `last_heartbeat` exactly; beats come every `max(1 s, min(ttl/2, 30 s))`; each beat is cut off
 * after the current interval so a hung request cannot outlive the lease; a 412 means lost (the
 * item must not be stopped); a stop verdict (`stopping`/`stopped`) or a lease not extended (`lease_extended` anything but
 * `true`, as the SDK reads it) ends the session; a
 * permanent 4xx ends it as rejected; once a whole TTL has passed since the last successful beat
 * (monotonic clock) the lease is assumed lost — at that moment, by a deadline timer re-armed on
 * each success, not at the next failed beat, since the server may already have handed the item
 * to another worker. `signal` aborts when the lease ends for any reason.
 */
export class Lease {
  readonly #api: HeartbeatApi;
  readonly #workId: string;
  readonly #environmentId: string;
  readonly #log: Logger;
  readonly #clock: TimerClock;
  readonly #onTtl: ((ttlMs: number) => void) | undefined;
  readonly #ctrl = new AbortController();
  readonly #floorMs: number;
  readonly #capMs: number;
  #ttlMs: number;
  #intervalMs: number;
  #last = NO_HEARTBEAT;
  #lastSuccessAt = 0;
  #cancelDeadline: CancelTimer | undefined;
  #reason: LeaseEndReason | undefined;
  #loop: Promise<void> | undefined;
  #beats = 0;
  /**
   * The last beat failed without an answer (a cut or lost connection, or this lease's own cut-off):
   * the server may have applied it, replacing the `last_heartbeat` the next beat echoes.
   */
  #unsure = false;
  /** The next beat goes out at once: the last one adopted the server's `last_heartbeat`. */
  #adopted = false;
  /** Milliseconds the last answered beat took, from sending to its answer. */
  #roundTripMs = 0;
  #serverState: string | undefined;
  #rejection: unknown;
  /** The first beat was refused for good: the item was never this worker's. */
  #claimRefused = false;
  #settleClaim: (claimed: boolean) => void = () => {};
  /**
   * Settles once, with the first beat's verdict: `true` when it succeeded and the server extended
   * the lease (the item is ours, and may be served); `false` when the lease ended first (a 412, a
   * refusal, a stop verdict, no success within the TTL, or {@link release}).
   */
  readonly claimed: Promise<boolean> = new Promise((resolve) => (this.#settleClaim = resolve));

  constructor(opts: LeaseOptions) {
    this.#api = opts.api;
    this.#workId = opts.workId;
    this.#environmentId = opts.environmentId;
    this.#log = opts.logger;
    this.#clock = opts.clock ?? monotonicClock;
    this.#onTtl = opts.onTtl;
    this.#capMs = opts.timing?.defaultIntervalMs ?? HEARTBEAT_INTERVAL_DEFAULT_MS;
    this.#floorMs = opts.timing?.floorMs ?? HEARTBEAT_INTERVAL_FLOOR_MS;
    this.#ttlMs = opts.timing?.defaultTtlMs ?? LEASE_TTL_DEFAULT_MS;
    this.#intervalMs = this.#capMs;
  }

  /** Aborts when the lease ends, whatever the reason. */
  get signal(): AbortSignal {
    return this.#ctrl.signal;
  }

  get reason(): LeaseEndReason | undefined {
    return this.#reason;
  }

  /**
   * True once the item belongs to the queue or another worker, or never was ours (its first beat
   * was refused for good): it must not be stopped.
   */
  get lost(): boolean {
    return this.lostAs !== undefined || this.#claimRefused;
  }

  /** How a lease that was ours ended in another's hands: a 412, or no answered beat for a TTL; else undefined. */
  get lostAs(): 'lease_lost' | 'assumed_lost' | undefined {
    return this.#reason === 'lease_lost' || this.#reason === 'assumed_lost' ? this.#reason : undefined;
  }

  /** The first beat was refused for good (a permanent 4xx other than 412): the item was never ours. */
  get claimRefused(): boolean {
    return this.#claimRefused;
  }

  /** Successful beats so far. */
  get beats(): number {
    return this.#beats;
  }

  /** The lease TTL in force (server's once known). */
  get ttlMs(): number {
    return this.#ttlMs;
  }

  /** What the server (or the loop) failed with when the lease ended as `rejected`. */
  get rejection(): unknown {
    return this.#rejection;
  }

  /** The last work state a beat reported, for logs. */
  get serverState(): string | undefined {
    return this.#serverState;
  }

  /** Start heartbeating; the first beat goes out now. Calling it twice does nothing. */
  start(): void {
    if (this.#loop) return;
    this.#lastSuccessAt = this.#clock.now();
    this.#armDeadline();
    this.#loop = this.#run().catch((e: unknown) => {
      this.#log.error({ err: e }, 'heartbeat loop failed; ending the session');
      this.#rejection ??= e;
      this.#end('rejected');
    });
  }

  /** Record why the lease ended (first reason wins) and stop heartbeating. */
  #end(reason: LeaseEndReason): void {
    this.#reason ??= reason;
    this.#settleClaim(false);
    this.#cancelDeadline?.();
    this.#cancelDeadline = undefined;
    this.#ctrl.abort(new Error(`lease ended: ${this.#reason}`));
  }

  /** (Re-)arm the deadline: one TTL after the last successful beat, on the injected clock. */
  #armDeadline(): void {
    this.#cancelDeadline?.();
    this.#cancelDeadline = undefined;
    if (this.#ctrl.signal.aborted) return;
    const remainingMs = this.#lastSuccessAt + this.#ttlMs - this.#clock.now();
    this.#cancelDeadline = this.#clock.schedule(remainingMs, () => this.#onDeadline());
  }

  #onDeadline(): void {
    this.#cancelDeadline = undefined;
    const silentMs = this.#clock.now() - this.#lastSuccessAt;
    // A timer may fire a little early by the clock's reckoning: wait out the rest.
    if (silentMs < this.#ttlMs) return this.#armDeadline();
    this.#log.error({ silent_ms: silentMs, ttl_ms: this.#ttlMs }, 'no successful heartbeat within the lease TTL; assuming the lease lost');
    this.#end('assumed_lost');
  }

  /** Let go of the lease (the session is over) and wait for the loop to wind down. */
  async release(): Promise<void> {
    this.#end('done');
    await this.#loop;
  }

  async #run(): Promise<void> {
    const signal = this.#ctrl.signal;
    while (!signal.aborted) {
      const ok = await this.#beat();
      if (signal.aborted) return;
      if (this.#adopted) {
        this.#adopted = false;
        continue;
      }
      if (!(await sleepUnlessAborted(ok ? this.#intervalMs : this.#retryDelayMs(), signal, this.#clock))) return;
    }
  }

  /**
   * After a failed beat the next one cannot wait a whole interval: at ttl/2 it would land on the
   * deadline. Retry at half the time left before it (at most the interval, at least a short floor).
   */
  #retryDelayMs(): number {
    const leftMs = this.#lastSuccessAt + this.#ttlMs - this.#clock.now();
    return Math.min(this.#intervalMs, Math.max(Math.min(this.#floorMs, HEARTBEAT_RETRY_FLOOR_MS), leftMs / 2));
  }

  /**
   * A 412 just after a beat that got no answer: that beat may have reached the server and replaced
   * the `last_heartbeat` this one echoed. While the lease is still this worker's by its own last
   * success (no other worker can claim an item before its lease ends), the server's
   * `last_heartbeat` is that beat's: take it, once, and beat again at once. True when taken.
   */
  #adoptAfterUnsureBeat(e: unknown): boolean {
    if (!this.#unsure || this.#beats === 0) return false;
    this.#unsure = false;
    const server = serverLeaseState(e);
    const last = server?.['last_heartbeat'];
    const leftMs = this.#lastSuccessAt + this.#ttlMs - this.#clock.now();
    if (typeof last !== 'string' || last === this.#last || leftMs <= claimMarginMs(this.#ttlMs, this.#roundTripMs)) return false;
    this.#log.info(
      { server, left_ms: Math.round(leftMs) },
      "a heartbeat whose answer was lost had reached the server; continuing the lease from the server's last_heartbeat",
    );
    this.#last = last;
    this.#adopted = true;
    return true;
  }

  /** One beat; true when it succeeded. */
  async #beat(): Promise<boolean> {
    const cutOff = new AbortController();
    const onEnd = (): void => cutOff.abort();
    this.#ctrl.signal.addEventListener('abort', onEnd, { once: true });
    const cutOffMs = this.#intervalMs;
    const cancelCutOff = this.#clock.schedule(cutOffMs, () => cutOff.abort(new Error(`heartbeat cut off after ${cutOffMs} ms`)));
    const sentAt = this.#clock.now();
    try {
      const resp = await this.#api.heartbeat(
        this.#workId,
        { environment_id: this.#environmentId, expected_last_heartbeat: this.#last },
        { signal: cutOff.signal },
      );
      this.#beats++;
      this.#unsure = false;
      this.#lastSuccessAt = this.#clock.now();
      this.#roundTripMs = this.#lastSuccessAt - sentAt;
      this.#last = resp.last_heartbeat;
      this.#serverState = resp.state;
      if (typeof resp.ttl_seconds === 'number' && resp.ttl_seconds > 0) {
        this.#ttlMs = resp.ttl_seconds * 1000;
        this.#intervalMs = heartbeatIntervalMs(this.#ttlMs, this.#floorMs, this.#capMs);
        this.#onTtl?.(this.#ttlMs);
      }
      this.#armDeadline();
      if (resp.state === 'stopping' || resp.state === 'stopped') {
        this.#log.info({ state: resp.state }, 'server asked to stop the work item; ending the session');
        this.#end('server_stop');
      } else if (resp.lease_extended !== true) {
        this.#log.info({ state: resp.state, lease_extended: resp.lease_extended }, 'server did not extend the lease; ending the session');
        this.#end('server_stop');
      } else {
        this.#settleClaim(true);
      }
      return true;
    } catch (e) {
      if (this.#ctrl.signal.aborted) return false;
      if (statusOf(e) === 412) {
        const adopted = this.#adoptAfterUnsureBeat(e);
        if (adopted) return false;
        this.#log.error({ server: serverLeaseState(e) }, 'lease lost (heartbeat precondition failed); leaving the item to its new owner');
        this.#end('lease_lost');
        return false;
      }
      if (classifyFailure(e) === 'fatal') {
        if (this.#beats === 0) {
          this.#claimRefused = true;
          this.#log.error({ error: errorSummary(e) }, 'first heartbeat refused for good; the item is not ours: not served, not stopped');
        } else {
          this.#log.error({ error: errorSummary(e) }, 'heartbeat rejected for good; ending the session');
        }
        this.#rejection = e;
        this.#end('rejected');
        return false;
      }
      if (statusOf(e) === undefined) this.#unsure = true;
      const silentMs = this.#clock.now() - this.#lastSuccessAt;
      if (silentMs > this.#ttlMs) {
        this.#log.error(
          { silent_ms: silentMs, ttl_ms: this.#ttlMs, error: errorSummary(e) },
          'no successful heartbeat within the lease TTL; assuming the lease lost',
        );
        this.#end('assumed_lost');
        return false;
      }
      this.#log.warn({ silent_ms: silentMs, error: errorSummary(e) }, 'heartbeat failed; retrying before the lease TTL runs out');
      return false;
    } finally {
      cancelCutOff();
      this.#ctrl.signal.removeEventListener('abort', onEnd);
    }
  }
}

/**
 * How long before the lease's end by this worker's reckoning (a TTL after its last answered beat)
 * another worker may already hold the item: the server's own end is at most one round trip
 * earlier, since the server applied that beat between its sending and its answer. Four round
 * trips, at least half a second, at most a quarter of the TTL.
 */
export function claimMarginMs(ttlMs: number, roundTripMs: number): number {
  return Math.min(ttlMs / 4, Math.max(500, 4 * roundTripMs));
}

/** The server's view of the lease from a 412 body, for the log line only. */
function serverLeaseState(e: unknown): Record<string, unknown> | undefined {
  if (!isApiError(e)) return undefined;
  const body = e.error as { error?: { details?: { current_state?: unknown } } } | undefined;
  const state = body?.error?.details?.current_state;
  if (typeof state !== 'object' || state === null) return undefined;
  const s = state as Record<string, unknown>;
  return { state: s['state'], ttl_seconds: s['ttl_seconds'], last_heartbeat: s['last_heartbeat'] };
}
