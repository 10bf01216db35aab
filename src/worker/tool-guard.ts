import type { BetaRunnableTool, BetaToolRunContext } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import type { Logger } from '../internal/logger.js';

/** The part of the sync loop a tool call triggers. Both are "never throw". */
export interface ToolCallHooks {
  beforeToolCall(): Promise<void>;
  afterToolCall(): void;
}

type ToolOutput = Awaited<ReturnType<BetaRunnableTool['run']>>;
type Recorded = { ok: true; output: ToolOutput } | { ok: false; error: unknown };

/** Sessions whose tool outcomes a {@link ToolCallRecord} keeps, least recently served dropped first. */
export const TOOL_RECORD_SESSIONS_MAX = 256;
/** Tool outcomes kept per session, oldest dropped first. */
export const TOOL_RECORD_CALLS_PER_SESSION_MAX = 1_000;

/**
 * The outcomes of the tool calls one worker ran, per session, kept across work items. When a
 * session's item comes back to the same worker (the lease was lost after a tool ran but before its
 * result was posted, and the server delivered the item anew), the new run answers that `tool_use`
 * from the record instead of running the tool a second time. Bounded in sessions and calls.
 */
export class ToolCallRecord {
  readonly #sessions = new Map<string, Map<string, Promise<Recorded>>>();
  readonly #maxSessions: number;
  readonly #maxCalls: number;

  constructor(opts: { maxSessions?: number; maxCallsPerSession?: number } = {}) {
    this.#maxSessions = opts.maxSessions ?? TOOL_RECORD_SESSIONS_MAX;
    this.#maxCalls = opts.maxCallsPerSession ?? TOOL_RECORD_CALLS_PER_SESSION_MAX;
  }

  /** The outcome map of one session (created on first use, and marked most recently used). */
  forSession(sessionId: string): OutcomeMap {
    let calls = this.#sessions.get(sessionId);
    if (calls) this.#sessions.delete(sessionId);
    else calls = new Map();
    this.#sessions.set(sessionId, calls);
    while (this.#sessions.size > this.#maxSessions) {
      const oldest = this.#sessions.keys().next().value as string;
      this.#sessions.delete(oldest);
    }
    const max = this.#maxCalls;
    const map = calls;
    return {
      get: (id) => map.get(id),
      set: (id, outcome) => {
        map.set(id, outcome);
        while (map.size > max) map.delete(map.keys().next().value as string);
      },
    };
  }

  /** Sessions currently recorded. */
  get sessions(): number {
    return this.#sessions.size;
  }
}

/** Where a {@link ToolGuard} keeps its outcomes. */
export interface OutcomeMap {
  get(toolUseId: string): Promise<Recorded> | undefined;
  set(toolUseId: string, outcome: Promise<Recorded>): void;
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
 * worker answers from it too.
 */
export class ToolGuard {
  readonly #outcomes: OutcomeMap;
  readonly #hooks: ToolCallHooks | undefined;
  readonly #log: Logger;
  #runs = 0;
  #replays = 0;

  constructor(opts: { hooks?: ToolCallHooks | undefined; logger: Logger; outcomes?: OutcomeMap }) {
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

  /** Wrap every tool of a session. Tools are never mutated. */
  wrapAll(tools: readonly BetaRunnableTool[]): BetaRunnableTool[] {
    return tools.map((t) => this.wrap(t));
  }

  wrap(tool: BetaRunnableTool): BetaRunnableTool {
    const run = async (args: unknown, context?: BetaToolRunContext): Promise<ToolOutput> => {
      const id = context?.toolUse?.id;
      if (id === undefined) return this.#execute(tool, args, context);
      const previous = this.#outcomes.get(id);
      if (previous) {
        this.#replays++;
        this.#log.warn({ tool_use_id: id, tool: toolLabel(tool) }, 'tool call replayed; answering with the recorded result instead of running it again');
        return unwrap(await previous);
      }
      const outcome = this.#execute(tool, args, context).then(
        (output): Recorded => ({ ok: true, output }),
        (error: unknown): Recorded => ({ ok: false, error }),
      );
      this.#outcomes.set(id, outcome);
      return unwrap(await outcome);
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
    if (this.#hooks) await this.#hooks.beforeToolCall();
    this.#runs++;
    try {
      return await tool.run(args, context);
    } finally {
      this.#hooks?.afterToolCall();
    }
  }
}

function unwrap(r: Recorded): ToolOutput {
  if (r.ok) return r.output;
  throw r.error;
}

function toolLabel(tool: BetaRunnableTool): string {
  return 'name' in tool && typeof tool.name === 'string' ? tool.name : String((tool as { type?: unknown }).type);
}
