import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type Anthropic from '@anthropic-ai/sdk';
import type { BetaSelfHostedWork } from '@anthropic-ai/sdk/resources/beta/environments/work';
import type { BetaToolRunnerRequestOptions } from '@anthropic-ai/sdk/lib/tools/BetaToolRunner';
import { classifyFailure, toRemoteApiError } from '../api/classify.js';
import { coerceError } from '../errors.js';
import { combineSignals, linkAbort, sleepUnlessAborted } from '../internal/abort.js';
import { backoffDelayMs, type BackoffPolicy } from '../internal/backoff.js';
import { monotonicClock, type TimerClock } from '../internal/clock.js';
import { API_LIMITS, WORK_CALL_CUT_OFFS } from '../internal/defaults.js';
import { errorSummary, type Logger } from '../internal/logger.js';

/** The API's cap on how long one poll may wait for work. */
export const POLL_BLOCK_MS = API_LIMITS.pollBlockMaxMs;
/** Backoff after failed polls: 1 s, 2 s, 4 s … 60 s, minus up to 25 %. */
export const POLL_BACKOFF: BackoffPolicy = { baseMs: 1_000, maxMs: 60_000, jitter: 0.25 };
/** A poll that takes longer than this is cut off and counted as a transient failure. */
export const POLL_CUT_OFF_MS = WORK_CALL_CUT_OFFS.pollMs;
/** Bound on one ack request. */
const ACK_CUT_OFF_MS = WORK_CALL_CUT_OFFS.ackMs;
/** An empty answer faster than this means the server did not hold the poll: pause briefly before the next. */
const FAST_EMPTY_MS = 200;
/** How often an idle poller says so at info level. */
const IDLE_REMINDER_MS = 300_000;

/** A claimed (polled and acknowledged) work item. `secret` is a credential: never log it. */
export interface ClaimedWork {
  id: string;
  environmentId: string;
  data: BetaSelfHostedWork['data'];
  secret: string | null;
}

/** The two work-queue calls the poller makes: a narrow interface so unit tests can pass a plain object. */
export interface WorkQueueApi {
  poll(
    environmentId: string,
    params: { 'Anthropic-Worker-ID': string; block_ms: number },
    options: { signal: AbortSignal },
  ): Promise<BetaSelfHostedWork | null | undefined>;
  ack(workId: string, params: { environment_id: string }, options: { signal: AbortSignal }): Promise<unknown>;
}

/** The work-queue calls over a client scoped to the environment key, with the caller's request options merged in. */
export function workQueueApi(client: Anthropic, requestOptions: BetaToolRunnerRequestOptions = {}): WorkQueueApi {
  return {
    poll: (environmentId, params, options) =>
      client.beta.environments.work.poll(environmentId, params, { ...requestOptions, signal: options.signal }),
    ack: (workId, params, options) => client.beta.environments.work.ack(workId, params, { ...requestOptions, signal: options.signal }),
  };
}

/**
 * The session slots a poller claims into. A poll holds one slot from before it is sent until its
 * item is handed out (the slot then belongs to the item) or it brings nothing (the slot is given
 * back), so polls in flight, items being acknowledged and running sessions together never exceed
 * the slots there are: the server never hands out an item there is no slot for.
 */
export interface ClaimSlots {
  /** Waits for a free slot and holds it; false (holding nothing) when `signal` aborted first. */
  reserve(signal: AbortSignal): Promise<boolean>;
  /** Holds a free slot now, or returns false when none is free. */
  tryReserve(): boolean;
  /** Gives back a held slot whose poll brought no item (empty, failed, or its ack failed). */
  release(): void;
}

export interface PollerOptions {
  /** The work queue, reached with the environment key (see {@link workQueueApi}). */
  api: WorkQueueApi;
  environmentId: string;
  workerId: string;
  logger: Logger;
  /**
   * Slots held per poll (see {@link ClaimSlots}). With them, claims overlap: the next poll goes out
   * while an item is acknowledged, and polls run in parallel while the queue has a backlog.
   * Takes precedence over `waitForSlot`.
   */
  slots?: ClaimSlots;
  /** Resolves when a session slot is free; the poller then claims one item at a time, polling only after it resolves. */
  waitForSlot?: (signal: AbortSignal) => Promise<void>;
  onPolled?: (workId: string | undefined) => void;
  onPollFailed?: (error: Error, retryInMs: number) => void;
  /** Time source of every wait and cut-off. Default: the process's monotonic clock. */
  clock?: TimerClock;
  random?: () => number;
}

/** Most polls one poller keeps in flight while the queue has a backlog. */
export const POLLS_IN_FLIGHT_MAX = 8;

/**
 * A default worker id: `<host name>-<uuid>`. The host name is the OS's (`os.hostname()`: shells
 * rarely export `HOSTNAME` to their children), else `HOSTNAME`; a bare uuid only when neither has one.
 */
export function defaultWorkerId(hostname: () => string = os.hostname): string {
  let host = '';
  try {
    host = hostname().trim();
  } catch {
    // No host name from the OS: fall back to the variable.
  }
  if (!host) host = (process.env['HOSTNAME'] ?? '').trim();
  return host ? `${host}-${randomUUID()}` : randomUUID();
}

/** The state of one `claims()` iteration, shared by its poll lanes and acks. */
interface ClaimRun {
  /** Aborts every poll of the iteration: the caller's signal, or a permanent failure. */
  stop: AbortController;
  /** Acknowledged items not handed out yet, each with what to call once it was. */
  ready: Array<{ work: ClaimedWork; handedOut: () => void }>;
  /** Poll loops running. */
  lanes: number;
  /** Acks in flight. */
  acks: number;
  /** Failed polls in a row. */
  failures: number;
  fatal: Error | undefined;
  /** Wakes the iteration when an item is ready or a lane or ack ended. */
  notify: () => void;
}

/**
 * Claims work items: long polls (`block_ms=999`) with the environment key and the
 * `Anthropic-Worker-ID` header, acknowledges each item and hands it out.
 *
 * - An idle poller keeps one poll in flight. Each poll that brings an item starts one more poll
 *   when a slot is free (up to {@link POLLS_IN_FLIGHT_MAX}), so a backlog is claimed in parallel;
 *   a poll that brings nothing ends its loop unless it is the last one.
 * - The next poll does not wait for the ack of the item before it (with {@link ClaimSlots}).
 * - Transient failures end the extra loops; the last one backs off with jitter (1 s doubling to
 *   60 s). A permanent 4xx (bad key, unknown environment) stops every poll and, once the acks in
 *   flight have settled and their items were handed out, throws a {@link RemoteApiError}.
 * - Every item whose ack succeeded is handed out, even after the signal aborted: an acknowledged
 *   item is ours and must end stopped.
 */
export class Poller {
  readonly #o: PollerOptions;
  readonly #clock: TimerClock;
  readonly #slots: ClaimSlots;
  /** Whether a poll may go out while the ack before it is in flight (the slots account for it). */
  readonly #overlap: boolean;
  #lastOkAt: number | undefined;
  #idleSince: number | undefined;
  #lastIdleLogAt = 0;

  constructor(opts: PollerOptions) {
    this.#o = opts;
    this.#clock = opts.clock ?? monotonicClock;
    this.#overlap = opts.slots !== undefined;
    this.#slots = opts.slots ?? serialSlots(opts.waitForSlot);
  }

  /** Monotonic ms of the last successful poll. */
  get lastOkAt(): number | undefined {
    return this.#lastOkAt;
  }

  /** Claimed items until `signal` aborts (and the acks in flight then have settled). */
  async *claims(signal: AbortSignal): AsyncGenerator<ClaimedWork> {
    let wake: (() => void) | undefined;
    const run: ClaimRun = {
      stop: new AbortController(),
      ready: [],
      lanes: 0,
      acks: 0,
      failures: 0,
      fatal: undefined,
      notify: () => {
        const w = wake;
        wake = undefined;
        w?.();
      },
    };
    const detach = linkAbort(signal, run.stop);
    this.#startLane(run, false);
    try {
      for (;;) {
        const next = run.ready.shift();
        if (next) {
          // Resumes once the caller has taken the item (it asks for the next one).
          yield next.work;
          next.handedOut();
          continue;
        }
        if (run.lanes === 0 && run.acks === 0) break;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      run.stop.abort(new Error('claims ended'));
      detach();
      for (const left of run.ready.splice(0)) left.handedOut();
    }
    if (run.fatal) throw run.fatal;
  }

  #startLane(run: ClaimRun, holding: boolean): void {
    run.lanes++;
    void this.#lane(run, holding);
  }

  /** One poll loop; `holding`: it starts with a slot already held for its first poll. */
  async #lane(run: ClaimRun, holding: boolean): Promise<void> {
    const stop = run.stop.signal;
    try {
      while (!stop.aborted) {
        if (!holding) {
          // Only the last loop waits for a slot; the others end when none is free.
          if (run.lanes > 1) {
            if (!this.#slots.tryReserve()) return;
          } else if (!(await this.#slots.reserve(stop))) {
            return;
          }
          holding = true;
          if (stop.aborted) return;
        }
        const started = this.#clock.now();
        let work: BetaSelfHostedWork | null | undefined;
        try {
          work = await this.#poll(stop);
        } catch (e) {
          if (stop.aborted) return;
          if (classifyFailure(e) === 'fatal') {
            const err = toRemoteApiError(e, `polling environment ${this.#o.environmentId} for work`);
            this.#o.logger.error({ error: errorSummary(err) }, 'poll rejected for good; the worker stops polling');
            run.fatal ??= err;
            run.stop.abort(err);
            return;
          }
          const retryInMs = backoffDelayMs(run.failures, POLL_BACKOFF, this.#o.random);
          run.failures++;
          const error = coerceError(e);
          this.#o.logger.warn({ error: errorSummary(error), retry_in_ms: retryInMs, failures: run.failures }, 'poll failed; backing off');
          // An expected failure: its stack only at debug.
          this.#o.logger.debug({ err: error }, 'poll failure, with its stack');
          this.#o.onPollFailed?.(error, retryInMs);
          // The last loop backs off; the others leave the polling to it.
          if (run.lanes > 1) return;
          holding = false;
          this.#slots.release();
          await sleepUnlessAborted(retryInMs, stop, this.#clock);
          continue;
        }
        run.failures = 0;
        this.#lastOkAt = this.#clock.now();
        this.#o.onPolled?.(work?.id);
        if (!work) {
          if (run.lanes > 1) return;
          this.#noteIdle();
          if (this.#clock.now() - started < FAST_EMPTY_MS) {
            await sleepUnlessAborted(FAST_EMPTY_MS + (this.#o.random ?? Math.random)() * 300, stop, this.#clock);
          }
          continue;
        }
        this.#idleSince = undefined;
        // The slot now belongs to the item (handed out, or given back if its ack fails).
        holding = false;
        const handedOut = this.#ack(run, work);
        // Without slots the poller cannot tell a free slot from one the item is about to take.
        if (!this.#overlap) await handedOut;
        else if (run.lanes < POLLS_IN_FLIGHT_MAX && !stop.aborted && this.#slots.tryReserve()) this.#startLane(run, true);
      }
    } catch (e) {
      // A bug in a loop (a callback that threw): end the claims with it rather than lose it.
      run.fatal ??= coerceError(e);
      run.stop.abort(run.fatal);
    } finally {
      // Counted out as it returns, so the next loop to decide sees whether it is the last one.
      run.lanes--;
      if (holding) this.#slots.release();
      run.notify();
    }
  }

  /**
   * Acknowledge a polled item; once acknowledged it is queued to be handed out. The ack is not cut
   * short when the iteration stops: an ack that reached the server makes the item ours, and an
   * item of ours must end stopped, so the caller gets it even when it is closing. Resolves once the
   * item was handed out, or at once when its ack failed.
   */
  async #ack(run: ClaimRun, work: BetaSelfHostedWork): Promise<void> {
    run.acks++;
    let handedOut: Promise<void> = Promise.resolve();
    const log = this.#o.logger.child({ work_id: work.id });
    log.info({ type: work.data.type }, 'work item polled');
    const ackCut = combineSignals([], ACK_CUT_OFF_MS, this.#clock);
    try {
      await this.#o.api.ack(work.id, { environment_id: work.environment_id }, { signal: ackCut.signal });
      const claimed: ClaimedWork = {
        id: work.id,
        environmentId: work.environment_id,
        data: work.data,
        secret: (work as { secret?: string | null }).secret ?? null,
      };
      handedOut = new Promise((resolve) => run.ready.push({ work: claimed, handedOut: resolve }));
    } catch (e) {
      // Not acknowledged: the item is not ours, and the server hands it out again after its reclaim delay.
      log.warn({ error: errorSummary(coerceError(e)) }, 'ack failed; the item is left for the server to hand out again');
      this.#slots.release();
    } finally {
      ackCut.dispose();
      run.acks--;
      run.notify();
    }
    return handedOut;
  }

  async #poll(signal: AbortSignal): Promise<BetaSelfHostedWork | null | undefined> {
    const cut = combineSignals([signal], POLL_CUT_OFF_MS, this.#clock);
    try {
      return await this.#o.api.poll(
        this.#o.environmentId,
        { 'Anthropic-Worker-ID': this.#o.workerId, block_ms: POLL_BLOCK_MS },
        { signal: cut.signal },
      );
    } finally {
      cut.dispose();
    }
  }

  /** Keep an idle loop quiet: first empty poll at info, then debug, with an info reminder every few minutes. */
  #noteIdle(): void {
    const now = this.#clock.now();
    if (this.#idleSince === undefined) {
      this.#idleSince = now;
      this.#lastIdleLogAt = now;
      this.#o.logger.info('idle; polling for work');
    } else if (now - this.#lastIdleLogAt >= IDLE_REMINDER_MS) {
      this.#lastIdleLogAt = now;
      this.#o.logger.info({ idle_ms: now - this.#idleSince }, 'still idle; polling for work');
    } else {
      this.#o.logger.debug('poll returned no work');
    }
  }
}

/**
 * Slots for a poller given only a "slot is free" wait (or nothing): one poll at a time, and the
 * next one only after the item before it was handed out.
 */
function serialSlots(waitForSlot: ((signal: AbortSignal) => Promise<void>) | undefined): ClaimSlots {
  return {
    reserve: async (signal) => {
      if (waitForSlot) {
        try {
          await waitForSlot(signal);
        } catch {
          return false;
        }
      }
      return !signal.aborted;
    },
    tryReserve: () => false,
    release: () => {},
  };
}
