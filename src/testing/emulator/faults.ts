import { ConfigError } from '../../errors.js';
import { createPrng } from './prng.js';

/**
 * A fault rule. A request matches when `route` (tested against `"METHOD /path"`, e.g.
 * `"POST /v1/memory_stores/memstore_1/memories"`) and `method` match (both optional); `rate`
 * decides with a seeded PRNG whether a match fires; a rule retires after firing `times` times.
 */
export interface FaultRule {
  /** Tested against `"METHOD /path"` (path without the query string). Omitted: every request. */
  route?: RegExp;
  /** HTTP method to match (case-insensitive). */
  method?: string;
  /** Fraction of matching requests the rule fires on, 0..1 (default 1). */
  rate?: number;
  /** Let the first `skip` matching requests through untouched (not counted in `hits`), then apply the rule. */
  skip?: number;
  /** Fire at most this many times, then retire (default: unlimited). */
  times?: number;
  /** Delay the answer by this long (adds to the emulator's `latencyMs`). */
  latencyMs?: number;
  /** Answer with this status and the API's error envelope instead of handling the request. */
  status?: number;
  /** `error.type` for `status` (default: the API's type for that status). */
  errorType?: string;
  /** `error.message` for `status`. */
  message?: string;
  /** `x-should-retry` header for `status` (default: not sent). */
  shouldRetry?: boolean;
  /** `error.details.error_code` for `status` (the SDK picks its error class from status + code). */
  errorCode?: string;
  /**
   * Answer 503 `storage_not_ready` (the SDK's `StorageNotReadyError`: the workspace is still being
   * connected to its storage). Shorthand for `status: 503, errorCode: 'storage_not_ready'` with the
   * API's message; `status`, `message` and `shouldRetry` given beside it win.
   */
  storageNotReady?: boolean;
  /** Never answer; the request stays open until the client gives up (or the emulator closes). */
  hang?: boolean;
  /** Apply the request, then destroy the socket without answering (a lost response). */
  dropResponse?: boolean;
  /**
   * Apply the request, send its 2xx status, headers (with the whole body's `content-length`) and
   * the first half of its body, then destroy the socket: a connection that drops part-way through
   * an answer that succeeded. Successful JSON answers only (not event streams).
   */
  cutBody?: boolean;
  /**
   * Cut (destroy) every open event stream of the session named in the path, right after this
   * request is answered. Combine with `status` for "a result post fails, then the stream drops".
   */
  dropStream?: boolean;
  /**
   * Handle the request, then answer with what this returns instead of the JSON body: an object is
   * sent as JSON, a string as the raw body (malformed JSON included). Models a server whose answers
   * are wrong: endless or repeated cursors, bad paths, oversized content. Successful answers only.
   */
  rewrite?: (body: unknown, request: { path: string; query: URLSearchParams }) => unknown;
  /** Heartbeat requests only: void the lease first, so this heartbeat answers 412. */
  leaseLost?: boolean;
  /**
   * Heartbeat requests only: stop the work item first (graceful → `stopping`; `{ force: true }` →
   * `stopped`), so this heartbeat reports it.
   */
  stopWork?:
    | boolean
    | {
        /** Stop at once (`stopped`) rather than gracefully (`stopping`). Default false. */
        force?: boolean;
      };
}

/** The answer of a `storageNotReady` rule: a workspace whose storage is not connected yet. */
export const STORAGE_NOT_READY = {
  status: 503,
  errorCode: 'storage_not_ready',
  message: "This workspace isn't ready yet: it's still being connected to its storage. Try again in a few minutes.",
} as const;

/** The handle `faults.add()` returns. */
export interface FaultHandle {
  /** The rule as it was added. */
  readonly rule: Readonly<FaultRule>;
  /** How many times the rule fired. */
  readonly hits: number;
  /** False once removed or retired by `times`. */
  readonly active: boolean;
  /** Remove the rule: it fires no more. Idempotent. */
  remove(): void;
}

/** The union of what the rules that fired on one request ask for. */
export interface FaultDecision {
  latencyMs: number;
  status?: { status: number; errorType?: string; message?: string; shouldRetry?: boolean; errorCode?: string };
  hang: boolean;
  dropResponse: boolean;
  cutBody: boolean;
  dropStream: boolean;
  leaseLost: boolean;
  stopWork?: { force: boolean };
  /** The body rewrites of the rules that fired, in the order the rules were added. */
  rewrites: Array<NonNullable<FaultRule['rewrite']>>;
  /** True when at least one rule fired. */
  fired: boolean;
}

class Entry implements FaultHandle {
  readonly rule: Readonly<FaultRule>;
  hits = 0;
  skipped = 0;
  active = true;
  readonly #owner: Faults;

  constructor(rule: FaultRule, owner: Faults) {
    this.rule = { ...rule };
    this.#owner = owner;
  }

  remove(): void {
    this.active = false;
    this.#owner._forget(this);
  }
}

/** The fault rules of one emulator. */
export class Faults {
  #entries: Entry[] = [];
  readonly #random: () => number;

  constructor(seed: number) {
    this.#random = createPrng(seed);
  }

  /** Add a rule; it applies to requests arriving from now on. */
  add(rule: FaultRule): FaultHandle {
    if (rule.rate !== undefined && (rule.rate < 0 || rule.rate > 1)) {
      throw new ConfigError(`fault rate must be between 0 and 1, got ${rule.rate}`);
    }
    if (rule.skip !== undefined && (!Number.isInteger(rule.skip) || rule.skip < 0)) {
      throw new ConfigError(`fault skip must be a non-negative integer, got ${rule.skip}`);
    }
    if (rule.times !== undefined && (!Number.isInteger(rule.times) || rule.times < 1)) {
      throw new ConfigError(`fault times must be a positive integer, got ${rule.times}`);
    }
    const entry = new Entry(rule, this);
    this.#entries.push(entry);
    return entry;
  }

  /** Remove every rule. */
  clear(): void {
    for (const entry of this.#entries) entry.active = false;
    this.#entries = [];
  }

  /** The active rules. */
  list(): FaultHandle[] {
    return [...this.#entries];
  }

  /** @internal */
  _forget(entry: Entry): void {
    this.#entries = this.#entries.filter((e) => e !== entry);
  }

  /** @internal Decide what faults fire on one request (counts hits, retires exhausted rules). */
  _decide(target: string, method: string, isHeartbeat: boolean): FaultDecision {
    const decision: FaultDecision = {
      latencyMs: 0,
      hang: false,
      dropResponse: false,
      cutBody: false,
      dropStream: false,
      leaseLost: false,
      rewrites: [],
      fired: false,
    };
    for (const entry of [...this.#entries]) {
      const rule = entry.rule;
      if (rule.method !== undefined && rule.method.toUpperCase() !== method) continue;
      if (rule.route !== undefined) {
        rule.route.lastIndex = 0;
        if (!rule.route.test(target)) continue;
      }
      if ((rule.leaseLost || rule.stopWork) && !isHeartbeat) continue;
      if (rule.skip !== undefined && entry.skipped < rule.skip) {
        entry.skipped++;
        continue;
      }
      const rate = rule.rate ?? 1;
      if (rate < 1 && this.#random() >= rate) continue;
      entry.hits++;
      if (rule.times !== undefined && entry.hits >= rule.times) entry.remove();
      decision.fired = true;
      decision.latencyMs += rule.latencyMs ?? 0;
      if ((rule.status !== undefined || rule.storageNotReady) && decision.status === undefined) {
        const storage = rule.storageNotReady === true ? STORAGE_NOT_READY : undefined;
        const errorCode = rule.errorCode ?? storage?.errorCode;
        const message = rule.message ?? storage?.message;
        decision.status = {
          status: rule.status ?? storage!.status,
          ...(rule.errorType !== undefined ? { errorType: rule.errorType } : {}),
          ...(message !== undefined ? { message } : {}),
          ...(rule.shouldRetry !== undefined ? { shouldRetry: rule.shouldRetry } : {}),
          ...(errorCode !== undefined ? { errorCode } : {}),
        };
      }
      decision.hang ||= rule.hang === true;
      decision.dropResponse ||= rule.dropResponse === true;
      decision.cutBody ||= rule.cutBody === true;
      decision.dropStream ||= rule.dropStream === true;
      decision.leaseLost ||= rule.leaseLost === true;
      if (rule.rewrite) decision.rewrites.push(rule.rewrite);
      if (rule.stopWork) {
        const force = typeof rule.stopWork === 'object' && rule.stopWork.force === true;
        decision.stopWork = { force: force || decision.stopWork?.force === true };
      }
    }
    return decision;
  }
}
