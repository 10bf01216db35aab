import { randomUUID } from 'node:crypto';
import type Anthropic from '@anthropic-ai/sdk';
import type { BetaSelfHostedWork } from '@anthropic-ai/sdk/resources/beta/environments/work';
import type { BetaToolRunnerRequestOptions } from '@anthropic-ai/sdk/lib/tools/BetaToolRunner';
import { classifyFailure, toRemoteApiError } from '../api/classify.js';
import { coerceError } from '../errors.js';
import { combineSignals, sleepUnlessAborted } from '../internal/abort.js';
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
    poll: (environmentId, params, options) => client.beta.environments.work.poll(environmentId, params, { ...requestOptions, signal: options.signal }),
    ack: (workId, params, options) => client.beta.environments.work.ack(workId, params, { ...requestOptions, signal: options.signal }),
  };
}

export interface PollerOptions {
  /** The work queue, reached with the environment key (see {@link workQueueApi}). */
  api: WorkQueueApi;
  environmentId: string;
  workerId: string;
  logger: Logger;
  /** Resolves when a session slot is free; the poller polls only after it resolves. */
  waitForSlot?: (signal: AbortSignal) => Promise<void>;
  onPolled?: (workId: string | undefined) => void;
  onPollFailed?: (error: Error, retryInMs: number) => void;
  /** Time source of every wait and cut-off. Default: the process's monotonic clock. */
  clock?: TimerClock;
  random?: () => number;
}

/** A default worker id: `<HOSTNAME>-<uuid>`, or a bare uuid without a host name. */
export function defaultWorkerId(): string {
  const host = process.env['HOSTNAME'];
  return host ? `${host}-${randomUUID()}` : randomUUID();
}

/**
 * Claims work items one at a time: long polls back to back (one in flight, `block_ms=999`) with the
 * environment key and the `Anthropic-Worker-ID` header, acknowledges each item and hands it out.
 * Transient failures back off with jitter (1 s doubling to 60 s); a permanent 4xx (bad key, unknown
 * environment) throws a {@link RemoteApiError} and ends the iteration. The poller polls only when
 * `waitForSlot` says a session slot is free, so a busy worker never claims work it cannot serve.
 */
export class Poller {
  readonly #o: PollerOptions;
  readonly #clock: TimerClock;
  #lastOkAt: number | undefined;
  #idleSince: number | undefined;
  #lastIdleLogAt = 0;

  constructor(opts: PollerOptions) {
    this.#o = opts;
    this.#clock = opts.clock ?? monotonicClock;
  }

  /** Monotonic ms of the last successful poll. */
  get lastOkAt(): number | undefined {
    return this.#lastOkAt;
  }

  /** Claimed items until `signal` aborts. */
  async *claims(signal: AbortSignal): AsyncGenerator<ClaimedWork> {
    let failures = 0;
    while (!signal.aborted) {
      if (this.#o.waitForSlot) {
        try {
          await this.#o.waitForSlot(signal);
        } catch {
          return;
        }
        if (signal.aborted) return;
      }
      const started = this.#clock.now();
      let work: BetaSelfHostedWork | null | undefined;
      try {
        work = await this.#poll(signal);
      } catch (e) {
        if (signal.aborted) return;
        if (classifyFailure(e) === 'fatal') {
          const err = toRemoteApiError(e, `polling environment ${this.#o.environmentId} for work`);
          this.#o.logger.error({ error: errorSummary(err) }, 'poll rejected for good; the worker stops polling');
          throw err;
        }
        const retryInMs = backoffDelayMs(failures, POLL_BACKOFF, this.#o.random);
        failures++;
        const error = coerceError(e);
        this.#o.logger.warn({ error: errorSummary(error), retry_in_ms: retryInMs, failures }, 'poll failed; backing off');
        // An expected failure: its stack only at debug.
        this.#o.logger.debug({ err: error }, 'poll failure, with its stack');
        this.#o.onPollFailed?.(error, retryInMs);
        await sleepUnlessAborted(retryInMs, signal, this.#clock);
        continue;
      }
      failures = 0;
      this.#lastOkAt = this.#clock.now();
      this.#o.onPolled?.(work?.id);
      if (!work) {
        this.#noteIdle();
        if (this.#clock.now() - started < FAST_EMPTY_MS) {
          await sleepUnlessAborted(FAST_EMPTY_MS + (this.#o.random ?? Math.random)() * 300, signal, this.#clock);
        }
        continue;
      }
      this.#idleSince = undefined;
      const log = this.#o.logger.child({ work_id: work.id });
      log.info({ type: work.data.type }, 'work item polled');
      // The ack is not cut short by close(): an ack that reached the server makes the item ours, and
      // an item of ours must end stopped, so the caller gets it even when it is closing.
      const ackCut = combineSignals([], ACK_CUT_OFF_MS, this.#clock);
      try {
        await this.#o.api.ack(work.id, { environment_id: work.environment_id }, { signal: ackCut.signal });
      } catch (e) {
        // Not acknowledged: the item is not ours, and the server hands it out again after its reclaim delay.
        log.warn({ error: errorSummary(coerceError(e)) }, 'ack failed; the item is left for the server to hand out again');
        continue;
      } finally {
        ackCut.dispose();
      }
      yield {
        id: work.id,
        environmentId: work.environment_id,
        data: work.data,
        secret: (work as { secret?: string | null }).secret ?? null,
      };
    }
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
