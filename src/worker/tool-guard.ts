import type { BetaRunnableTool, BetaToolRunContext } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { abortReason, onAbort } from '../internal/abort.js';
import type { Logger } from '../internal/logger.js';

/** The part of the sync loop a tool call triggers. All are "never throw". */
export interface ToolCallHooks {
  beforeToolCall(): Promise<void>;
  afterToolCall(): void;
  /** The call was stopped or timed out (called before its `afterToolCall`): it may have moved files away half-way. */
  callStopped?(): void;
}

type ToolOutput = Awaited<ReturnType<BetaRunnableTool['run']>>;
type Recorded = { ok: true; output: ToolOutput } | { ok: false; error: unknown };

/** Sessions whose tool outcomes a {@link ToolCallRecord} keeps, least recently served dropped first. */
export const TOOL_RECORD_SESSIONS_MAX = 256;
/** Tool outcomes kept per session, oldest dropped first. */
export const TOOL_RECORD_CALLS_PER_SESSION_MAX = 1_000;
/**
 * Bytes of tool output (and error text) a {@link ToolCallRecord} keeps, all sessions together:
 * past it the oldest finished outcomes are dropped first. Only outcomes whose result was not posted
 * yet are kept, so this is reached only when many posts failed.
 */
export const TOOL_RECORD_BYTES_MAX = 32 * 1024 * 1024;

/** One recorded call: its outcome, and its weight once it is known (`undefined` while it runs). */
interface RecordEntry {
  outcome: Promise<Recorded>;
  bytes: number | undefined;
}

/**
 * The outcomes of the tool calls one worker ran, per session, kept across work items until their
 * result is posted. When a session's item comes back to the same worker (the lease was lost after
 * a tool ran but before its result was posted, and the server delivered the item anew), the new run
 * answers that `tool_use` from the record instead of running the tool a second time.
 *
 * Rules:
 * - an outcome is dropped as soon as its result is posted ({@link OutcomeMap.delete}): the posted
 *   result is in the session's history from then on, and the SDK's runner, reading that history
 *   when it starts, never dispatches an answered call again; a session left with no outcome is
 *   dropped with its last one;
 * - bounded in sessions (least recently served dropped first), in calls per session (oldest first)
 *   and in bytes, all sessions together (oldest finished outcome first; a call still running is
 *   never dropped, a concurrent replay waits for it). A dropped unposted outcome costs a second run
 *   of that tool if its call is replayed, never a wrong answer.
 */
export class ToolCallRecord {
  readonly #sessions = new Map<string, Map<string, RecordEntry>>();
  readonly #maxSessions: number;
  readonly #maxCalls: number;
  readonly #maxBytes: number;
  readonly #log: Logger | undefined;
  #bytes = 0;

  constructor(opts: { maxSessions?: number; maxCallsPerSession?: number; maxBytes?: number; logger?: Logger } = {}) {
    this.#maxSessions = opts.maxSessions ?? TOOL_RECORD_SESSIONS_MAX;
    this.#maxCalls = opts.maxCallsPerSession ?? TOOL_RECORD_CALLS_PER_SESSION_MAX;
    this.#maxBytes = opts.maxBytes ?? TOOL_RECORD_BYTES_MAX;
    this.#log = opts.logger;
  }

  /** The outcome map of one session (marked most recently served). */
  forSession(sessionId: string): OutcomeMap {
    const calls = this.#sessions.get(sessionId);
    if (calls) {
      this.#sessions.delete(sessionId);
      this.#sessions.set(sessionId, calls);
    }
    return {
      get: (id) => this.#sessions.get(sessionId)?.get(id)?.outcome,
      set: (id, outcome) => this.#set(sessionId, id, outcome),
      delete: (id) => this.#delete(sessionId, id),
    };
  }

  /** Sessions currently recorded. */
  get sessions(): number {
    return this.#sessions.size;
  }

  /** Outcomes currently recorded, all sessions together. */
  get outcomes(): number {
    let n = 0;
    for (const calls of this.#sessions.values()) n += calls.size;
    return n;
  }

  /** Weight of the finished outcomes recorded (see {@link outcomeBytes}). */
  get bytes(): number {
    return this.#bytes;
  }

  #set(sessionId: string, id: string, outcome: Promise<Recorded>): void {
    let calls = this.#sessions.get(sessionId);
    if (!calls) {
      calls = new Map();
      this.#sessions.set(sessionId, calls);
      while (this.#sessions.size > this.#maxSessions) this.#dropSession(this.#sessions.keys().next().value as string);
    }
    this.#forget(calls, id);
    const entry: RecordEntry = { outcome, bytes: undefined };
    calls.set(id, entry);
    while (calls.size > this.#maxCalls) this.#forget(calls, calls.keys().next().value as string);
    void outcome.then((r) => {
      // Posted (or dropped) while it ran: nothing to weigh.
      if (this.#sessions.get(sessionId)?.get(id) !== entry) return;
      entry.bytes = outcomeBytes(r);
      this.#bytes += entry.bytes;
      if (this.#bytes > this.#maxBytes) this.#trim();
    });
  }

  #delete(sessionId: string, id: string): void {
    const calls = this.#sessions.get(sessionId);
    if (!calls) return;
    this.#forget(calls, id);
    if (calls.size === 0) this.#sessions.delete(sessionId);
  }

  #forget(calls: Map<string, RecordEntry>, id: string): void {
    const entry = calls.get(id);
    if (!entry) return;
    calls.delete(id);
    this.#bytes -= entry.bytes ?? 0;
  }

  #dropSession(sessionId: string): void {
    const calls = this.#sessions.get(sessionId);
    if (!calls) return;
    for (const entry of calls.values()) this.#bytes -= entry.bytes ?? 0;
    this.#sessions.delete(sessionId);
  }

  /** Drop finished outcomes, least recently served session and oldest call first, until under the bound. */
  #trim(): void {
    let dropped = 0;
    for (const [sessionId, calls] of this.#sessions) {
      for (const [id, entry] of calls) {
        if (this.#bytes <= this.#maxBytes) break;
        if (entry.bytes === undefined) continue;
        this.#forget(calls, id);
        dropped++;
      }
      if (calls.size === 0) this.#sessions.delete(sessionId);
      if (this.#bytes <= this.#maxBytes) break;
    }
    if (dropped > 0) {
      this.#log?.warn(
        { dropped, max_bytes: this.#maxBytes },
        'tool outcomes whose results were not posted dropped from the record (over its byte bound); a replay of one of those calls runs the tool again',
      );
    }
  }
}

/**
 * What a recorded outcome weighs, about: the characters of every string in it (text, base64 image
 * data, an error's message and stack) plus 16 bytes for every other value, walked a few levels deep.
 */
export function outcomeBytes(r: Recorded): number {
  if (r.ok) return weigh(r.output, 0);
  const e = r.error as { message?: unknown; stack?: unknown } | null | undefined;
  const text = typeof e === 'object' && e !== null ? String(e.message ?? '').length + String(e.stack ?? '').length : String(r.error).length;
  return 64 + text;
}

function weigh(v: unknown, depth: number): number {
  if (typeof v === 'string') return v.length;
  if (typeof v !== 'object' || v === null || depth > 6) return 16;
  let n = 16;
  for (const x of Array.isArray(v) ? v : Object.values(v as Record<string, unknown>)) n += weigh(x, depth + 1);
  return n;
}

/** Where a {@link ToolGuard} keeps its outcomes. */
export interface OutcomeMap {
  get(toolUseId: string): Promise<Recorded> | undefined;
  set(toolUseId: string, outcome: Promise<Recorded>): void;
  /** The call's result was posted: its outcome is no longer needed. */
  delete(toolUseId: string): void;
}

/**
 * Makes every tool call run at most once per `tool_use` id within a session, and brackets each
 * real run with the memory sync hooks.
 *
 * The SDK's session runner keeps its "answered" set in memory and learns answers from the event
 * history; when posting a result fails for good and the stream reconnects, the history shows the
 * `tool_use` without a result and the runner dispatches it again. The runner passes the source
 * event to `run` as `context.toolUse`, so the guard keys on `context.toolUse.id`: the first call
 * runs the tool and records what it returned or threw; a replay of the same id gets the recorded
 * outcome again (the runner re-posts it) without touching the filesystem. A call for an id that is
 * still running waits for that run instead of starting a second one. Given a session's map from a
 * {@link ToolCallRecord}, the record outlives the item, so a later run of the same session in this
 * worker answers from it too. Once the runner says a call's result was posted ({@link posted}), its
 * outcome is dropped: the session's history answers any later run.
 *
 * The hooks may be given as a promise: the tools are then held until it settles (the session's
 * stores being mounted while its runner already reads the session). A call whose signal aborts
 * while it is held never starts and leaves no outcome, so a later runner's dispatch of the same id
 * runs it; a promise that rejects fails the held calls with its reason.
 */
export class ToolGuard {
  readonly #outcomes: OutcomeMap;
  readonly #hooks: ToolCallHooks | PromiseLike<ToolCallHooks | undefined> | undefined;
  readonly #log: Logger;
  #runs = 0;
  #replays = 0;

  constructor(opts: { hooks?: ToolCallHooks | PromiseLike<ToolCallHooks | undefined> | undefined; logger: Logger; outcomes?: OutcomeMap }) {
    this.#outcomes = opts.outcomes ?? new Map<string, Promise<Recorded>>();
    this.#hooks = opts.hooks;
    this.#log = opts.logger;
  }

  /** Tool runs that really executed. */
  get runs(): number {
    return this.#runs;
  }

  /** Calls answered from the record instead of running again. */
  get replays(): number {
    return this.#replays;
  }

  /** The result of `toolUseId` was posted to the session: forget its outcome. */
  posted(toolUseId: string): void {
    this.#outcomes.delete(toolUseId);
  }

  /** Wrap every tool of a session. Tools are never mutated. */
  wrapAll(tools: readonly BetaRunnableTool[]): BetaRunnableTool[] {
    return tools.map((t) => this.wrap(t));
  }

  wrap(tool: BetaRunnableTool): BetaRunnableTool {
    const run = async (args: unknown, context?: BetaToolRunContext): Promise<ToolOutput> => {
      const id = context?.toolUse?.id;
      if (id === undefined) {
        return this.#execute(tool, args, context).catch((e: unknown) => {
          throw e instanceof NotStarted ? e.reason : e;
        });
      }
      const previous = this.#outcomes.get(id);
      if (previous) {
        this.#replays++;
        this.#log.warn(
          { tool_use_id: id, tool: toolLabel(tool) },
          'tool call replayed; answering with the recorded result instead of running it again',
        );
        return unwrap(await previous);
      }
      const outcome = this.#execute(tool, args, context).then(
        (output): Recorded => ({ ok: true, output }),
        (error: unknown): Recorded => ({ ok: false, error }),
      );
      this.#outcomes.set(id, outcome);
      const recorded = await outcome;
      if (!recorded.ok && recorded.error instanceof NotStarted) {
        if (this.#outcomes.get(id) === outcome) this.#outcomes.delete(id);
        throw recorded.error.reason;
      }
      return unwrap(recorded);
    };
    // A proxy rather than a spread: a tool may be a class instance whose `close` (or other methods)
    // live on its prototype or use private fields; those keep working, bound to the original.
    return new Proxy(tool, {
      get(target, prop) {
        if (prop === 'run') return run;
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  }

  async #execute(tool: BetaRunnableTool, args: unknown, context: BetaToolRunContext | undefined): Promise<ToolOutput> {
    const hooks = await held(this.#hooks, context?.signal ?? undefined);
    if (hooks) await hooks.beforeToolCall();
    this.#runs++;
    let failed = false;
    try {
      return await tool.run(args, context);
    } catch (e) {
      failed = true;
      throw e;
    } finally {
      // Stopped or timed out, as the runner sees it: the call's signal aborted and it ended in an error.
      if (failed && context?.signal?.aborted === true) hooks?.callStopped?.();
      hooks?.afterToolCall();
    }
  }
}

/** A held call's signal aborted before it started: nothing ran, so nothing is recorded. */
class NotStarted {
  constructor(readonly reason: Error) {}
}

/** The hooks, once `hooks` settles; a {@link NotStarted} rejection when `signal` aborts first. */
function held(
  hooks: ToolCallHooks | PromiseLike<ToolCallHooks | undefined> | undefined,
  signal: AbortSignal | undefined,
): ToolCallHooks | undefined | Promise<ToolCallHooks | undefined> {
  if (hooks === undefined || !('then' in hooks)) return hooks;
  return new Promise((resolve, reject) => {
    const detach = onAbort(signal, () => reject(new NotStarted(abortReason(signal!))));
    hooks.then(
      (h) => {
        detach();
        resolve(h);
      },
      (e: unknown) => {
        detach();
        reject(e);
      },
    );
  });
}

function unwrap(r: Recorded): ToolOutput {
  if (r.ok) return r.output;
  throw r.error;
}

function toolLabel(tool: BetaRunnableTool): string {
  return 'name' in tool && typeof tool.name === 'string' ? tool.name : String((tool as { type?: unknown }).type);
}
