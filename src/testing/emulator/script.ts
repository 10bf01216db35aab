import { ConfigError } from '../../errors.js';
import { newId } from './ids.js';
import type { Session, SessionEvent } from './model/session.js';
import type { EmulatorState } from './state.js';

/** A tool call of the scripted agent. */
export interface ToolStep {
  /** Tool name the agent calls (`read`, `write`, `edit`, `bash`, `grep`, or a custom tool). */
  tool: string;
  /** The tool input the agent sends. Default `{}`. */
  input?: Record<string, unknown>;
  /** Emit `agent.custom_tool_use` (answered by `user.custom_tool_result`) instead of `agent.tool_use`. */
  custom?: boolean;
  /** `evaluated_permission` on the event; `deny` calls are not waited for. Omitted: none sent. */
  permission?: 'allow' | 'ask' | 'deny';
  /**
   * `session_thread_id` on the event, with the session-level idle of a primary-thread call and no
   * thread status events (use a `threads` step for threads with a lifecycle).
   */
  threadId?: string;
}

/** A step that runs no tool: a callback, a pause, or an agent message. */
export type PlainStep<E = unknown> =
  | {
      /** Runs between tool calls, e.g. a Console edit: `(emu) => emu.putMemory(...)`. */
      console: (emu: E) => unknown;
    }
  | {
      /** Wait this many milliseconds before the next step. */
      sleepMs: number;
    }
  | {
      /** Emit an `agent.message` with this text. */
      message: string;
    };

/** One child session thread of a `threads` step (a subagent of a multi-agent session). */
export interface ThreadScript<E = unknown> {
  /** Its `session_thread_id`. Default: a new `sthr_…` id. */
  threadId?: string;
  /** `agent_name` on its events. Default `subagent`. */
  agentName?: string;
  /** What the thread does, in order; its tool calls carry its `session_thread_id`. */
  steps: Array<Omit<ToolStep, 'threadId'> | PlainStep<E>>;
  /**
   * After its last step the thread goes idle with `end_turn`, then (`'terminate'`, default) sends
   * `session.thread_status_terminated`, or (`'idle'`) stays idle.
   */
  end?: 'terminate' | 'idle';
}

/** One step of a scripted agent. `E` is the emulator handed to `console` steps. */
export type ScriptStep<E = unknown> =
  | ToolStep
  | PlainStep<E>
  | {
      /**
       * Child threads that run at the same time, each through its own steps; the step ends once
       * every thread has ended its steps or was terminated (`emu.terminateThread`).
       */
      threads: ThreadScript<E>[];
    };

/**
 * How the agent ends: `'terminate'` (default) goes idle with `end_turn` and terminates at once;
 * `{ idleMs }` stays idle that long first; `'idle'` never terminates (archive it yourself).
 */
export type SessionEnd =
  | 'terminate'
  | 'idle'
  | {
      /** Milliseconds the session stays idle before it terminates. */
      idleMs: number;
    };

/** Text of the `text` blocks of a tool result's content, joined with `\n`. */
export function resultText(content: unknown): string {
  if (!Array.isArray(content)) return '';
  return content
    .filter(
      (b): b is { type: 'text'; text: string } =>
        typeof b === 'object' &&
        b !== null &&
        (b as { type?: unknown }).type === 'text' &&
        typeof (b as { text?: unknown }).text === 'string',
    )
    .map((b) => b.text)
    .join('\n');
}

/**
 * Plays a script as the session's agent: for each tool step it emits the tool-use event and a
 * `requires_action` idle, then waits for the worker's result before the next step; at the end it
 * goes idle with `end_turn` and terminates (per `end`). Every result for a scripted call is
 * recorded on the session, duplicates included.
 */
export class ScriptPlayer<E> {
  readonly #session: Session;
  readonly #steps: ReadonlyArray<ScriptStep<E>>;
  readonly #end: SessionEnd;
  readonly #emu: E;
  readonly #state: EmulatorState;
  readonly #stop: AbortSignal;
  /** Scripted calls by tool-use event id. */
  readonly #calls = new Map<
    string,
    {
      name: string;
      input: Record<string, unknown>;
      resultType: string;
      resolve: () => void;
      answered: boolean;
      threadId: string | null;
      calledAtMs: number;
    }
  >();
  /** The child threads of `threads` steps, by `session_thread_id`: aborted once the thread ended. */
  readonly #threads = new Map<string, { agentName: string; ended: AbortController }>();
  #done: Promise<void> | undefined;

  constructor(init: {
    session: Session;
    steps: ReadonlyArray<ScriptStep<E>>;
    end: SessionEnd;
    emu: E;
    state: EmulatorState;
    stop: AbortSignal;
  }) {
    this.#session = init.session;
    this.#steps = init.steps;
    this.#end = init.end;
    this.#emu = init.emu;
    this.#state = init.state;
    this.#stop = init.stop;
    this.#session.onEvent((ev) => this.#onEvent(ev));
  }

  get started(): boolean {
    return this.#done !== undefined;
  }

  /** Start playing (idempotent). */
  start(): void {
    this.#done ??= this.#run().catch((err: unknown) => {
      this.#session.scriptError = err instanceof Error ? err : new Error(String(err));
      this.#session.scriptProgress = `failed: ${this.#session.scriptError.message}`;
      this.#state.terminateSession(this.#session);
    });
  }

  #onEvent(ev: SessionEvent): void {
    const id =
      ev.type === 'user.tool_result' ? ev['tool_use_id'] : ev.type === 'user.custom_tool_result' ? ev['custom_tool_use_id'] : undefined;
    if (typeof id !== 'string') return;
    const call = this.#calls.get(id);
    if (!call || call.resultType !== ev.type) return;
    const content = Array.isArray(ev['content']) ? (ev['content'] as unknown[]) : [];
    this.#session.toolResults.push({
      name: call.name,
      input: call.input,
      isError: ev['is_error'] === true,
      text: resultText(content),
      toolUseId: id,
      content,
      threadId: call.threadId,
      calledAtMs: call.calledAtMs,
      answeredAtMs: Date.now(),
    });
    if (!call.answered) {
      call.answered = true;
      call.resolve();
    }
  }

  async #run(): Promise<void> {
    const session = this.#session;
    const total = this.#steps.length;
    this.#setStatus('running');
    for (const [i, step] of this.#steps.entries()) {
      if (session.terminated || this.#stop.aborted) return;
      const where = `step ${i + 1}/${total}`;
      if ('tool' in step) {
        await this.#toolStep(step, where, this.#primaryLane(step.threadId));
      } else if ('threads' in step) {
        await this.#threadsStep(step.threads, where);
      } else {
        await this.#plainStep(step, where, undefined);
      }
    }
    if (session.terminated || this.#stop.aborted) return;
    session.status = 'idle';
    session.append({ type: 'session.status_idle', stop_reason: { type: 'end_turn' }, stop_details: null });
    if (this.#end === 'idle') {
      session.scriptProgress = 'finished; idle until archived';
      return;
    }
    if (typeof this.#end === 'object') {
      session.scriptProgress = `finished; idle for ${this.#end.idleMs} ms before terminating`;
      await this.#sleep(this.#end.idleMs);
      if (this.#stop.aborted) return;
    }
    session.scriptProgress = 'finished; terminated';
    this.#state.terminateSession(session);
  }

  /**
   * Terminate a session thread: `session.thread_status_terminated`, and a call it still waits on is
   * no longer waited for (a result posted for it is refused). A no-op once it is terminated.
   */
  terminateThread(threadId: string): void {
    const session = this.#session;
    const lane = this.#threads.get(threadId);
    if (!lane && !session.threads.has(threadId) && ![...this.#calls.values()].some((c) => c.threadId === threadId)) {
      throw new ConfigError(`session ${session.id} has no thread ${threadId}`);
    }
    if (session.terminated || session.threads.get(threadId) === 'terminated') return;
    session.append({ type: 'session.thread_status_terminated', session_thread_id: threadId, agent_name: lane?.agentName ?? 'subagent' });
    lane?.ended.abort();
  }

  async #plainStep(step: PlainStep<E>, where: string, lane: Lane | undefined): Promise<void> {
    const session = this.#session;
    if ('console' in step) {
      session.scriptProgress = `${where}: running a console step`;
      try {
        await step.console(this.#emu);
      } catch (err) {
        // The test's own console step failed: its error, as written, fails the test that waits on the session.
        throw new Error(`script ${where} (console) of session ${session.id} threw: ${String(err)}`, { cause: err });
      }
    } else if ('sleepMs' in step) {
      session.scriptProgress = `${where}: sleeping ${step.sleepMs} ms`;
      await this.#sleep(step.sleepMs, lane?.ended);
    } else {
      session.append({
        type: 'agent.message',
        content: [{ type: 'text', text: step.message }],
        ...(lane?.threadId !== undefined ? { session_thread_id: lane.threadId } : {}),
      });
    }
  }

  /** The primary thread: a call makes the whole session idle with `requires_action`. */
  #primaryLane(threadId: string | undefined): Lane {
    const session = this.#session;
    return {
      threadId,
      waitOn: (eventId) => {
        session.status = 'idle';
        session.append({ type: 'session.status_idle', stop_reason: { type: 'requires_action', event_ids: [eventId] }, stop_details: null });
      },
      resume: () => this.#setStatus('running'),
      ended: undefined,
    };
  }

  /** Start every thread (created, then running, in the order given) and play them all at once. */
  async #threadsStep(threads: ThreadScript<E>[], where: string): Promise<void> {
    const session = this.#session;
    const lanes = threads.map((thread): Lane => {
      const threadId = thread.threadId ?? newId('sthr');
      if (this.#threads.has(threadId))
        throw new ConfigError(
          `script ${where} of session ${session.id}: thread ${threadId} is started twice; give each thread of a session its own id`,
        );
      const agentName = thread.agentName ?? 'subagent';
      const ended = new AbortController();
      this.#threads.set(threadId, { agentName, ended });
      const status =
        (type: string, extra: Record<string, unknown> = {}) =>
        (): void => {
          session.append({ type, session_thread_id: threadId, agent_name: agentName, ...extra });
        };
      session.append({ type: 'session.thread_created', session_thread_id: threadId, agent_name: agentName, workflow_run_id: null });
      status('session.thread_status_running')();
      return {
        threadId,
        waitOn: (eventId) =>
          status('session.thread_status_idle', { stop_reason: { type: 'requires_action', event_ids: [eventId] }, stop_details: null })(),
        resume: status('session.thread_status_running'),
        ended: ended.signal,
      };
    });
    await Promise.all(threads.map((thread, i) => this.#playThread(thread, lanes[i]!, `${where}, thread ${lanes[i]!.threadId}`)));
  }

  async #playThread(thread: ThreadScript<E>, lane: Lane, where: string): Promise<void> {
    const session = this.#session;
    const threadId = lane.threadId!;
    const over = (): boolean => session.terminated || this.#stop.aborted || lane.ended?.aborted === true;
    const total = thread.steps.length;
    for (const [i, step] of thread.steps.entries()) {
      if (over()) return;
      const at = `${where} step ${i + 1}/${total}`;
      if ('tool' in step) await this.#toolStep(step, at, lane);
      else await this.#plainStep(step, at, lane);
    }
    if (over()) return;
    session.append({
      type: 'session.thread_status_idle',
      session_thread_id: threadId,
      agent_name: this.#threads.get(threadId)?.agentName ?? 'subagent',
      stop_reason: { type: 'end_turn' },
      stop_details: null,
    });
    if ((thread.end ?? 'terminate') === 'terminate') this.terminateThread(threadId);
  }

  async #toolStep(step: Omit<ToolStep, 'threadId'>, where: string, lane: Lane): Promise<void> {
    const session = this.#session;
    const input = step.input ?? {};
    const type = step.custom ? 'agent.custom_tool_use' : 'agent.tool_use';
    let resolve!: () => void;
    const answered = new Promise<void>((r) => (resolve = r));
    const event = session.append({
      type,
      name: step.tool,
      input,
      ...(step.permission !== undefined ? { evaluated_permission: step.permission } : {}),
      ...(lane.threadId !== undefined ? { session_thread_id: lane.threadId } : {}),
    });
    this.#calls.set(event.id, {
      name: step.tool,
      input,
      resultType: step.custom ? 'user.custom_tool_result' : 'user.tool_result',
      resolve,
      answered: false,
      threadId: lane.threadId ?? null,
      calledAtMs: Date.now(),
    });
    if (step.permission === 'deny') return;
    session.scriptProgress = `${where}: waiting for the result of ${step.tool} (${type} ${event.id})`;
    lane.waitOn(event.id);
    await this.#until(answered, lane.ended);
    if (session.terminated || this.#stop.aborted || lane.ended?.aborted) return;
    lane.resume();
  }

  #setStatus(status: 'running'): void {
    this.#session.status = status;
    this.#session.append({ type: 'session.status_running' });
  }

  /**
   * Resolve when `p` does, the session ends (terminated, archived, deleted), the emulator closes,
   * or `lane` (a thread's end) aborts. Every listener is removed afterwards: the stop signal is
   * shared by every session of the emulator.
   */
  async #until(p: Promise<void>, lane?: AbortSignal): Promise<void> {
    const cleanup: Array<() => unknown> = [];
    const ended = new Promise<void>((resolve) => {
      if (this.#session.terminated || this.#stop.aborted || lane?.aborted) return resolve();
      const onAbort = (): void => resolve();
      for (const signal of [this.#stop, lane]) {
        if (!signal) continue;
        signal.addEventListener('abort', onAbort, { once: true });
        cleanup.push(() => signal.removeEventListener('abort', onAbort));
      }
      cleanup.push(this.#session.onEnd(onAbort));
      cleanup.push(
        this.#session.onEvent((ev) => {
          if (ev.type === 'session.status_terminated' || ev.type === 'session.deleted') resolve();
        }),
      );
    });
    try {
      await Promise.race([p, ended]);
    } finally {
      for (const undo of cleanup) undo();
    }
  }

  async #sleep(ms: number, lane?: AbortSignal): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await this.#until(new Promise((resolve) => (timer = setTimeout(resolve, ms).unref())), lane);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Where a tool call is made: the primary thread, or one child thread of a `threads` step. */
interface Lane {
  /** `session_thread_id` of its calls; `undefined` on the primary thread. */
  threadId: string | undefined;
  /** Tell the worker the thread waits on this call. */
  waitOn(eventId: string): void;
  /** The thread runs again after the result. */
  resume(): void;
  /** Aborted once the thread ended; `undefined` for the primary thread. */
  ended: AbortSignal | undefined;
}
