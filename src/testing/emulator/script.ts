import type { Session, SessionEvent } from './model/session.js';
import type { EmulatorState } from './state.js';

/** One step of a scripted agent. `E` is the emulator handed to `console` steps. */
export type ScriptStep<E = unknown> =
  | {
      /** Tool name the agent calls (`read`, `write`, `edit`, `bash`, `grep`, or a custom tool). */
      tool: string;
      input?: Record<string, unknown>;
      /** Emit `agent.custom_tool_use` (answered by `user.custom_tool_result`) instead of `agent.tool_use`. */
      custom?: boolean;
      /** `evaluated_permission` on the event; `deny` calls are not waited for. Omitted: none sent. */
      permission?: 'allow' | 'ask' | 'deny';
      /** `session_thread_id` on the event. */
      threadId?: string;
    }
  | {
      /** Runs between tool calls, e.g. a Console edit: `(emu) => emu.putMemory(...)`. */
      console: (emu: E) => unknown;
    }
  | { sleepMs: number }
  | {
      /** Emit an `agent.message` with this text. */
      message: string;
    };

/**
 * How the agent ends: `'terminate'` (default) goes idle with `end_turn` and terminates at once;
 * `{ idleMs }` stays idle that long first; `'idle'` never terminates (archive it yourself).
 */
export type SessionEnd = 'terminate' | 'idle' | { idleMs: number };

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
    { name: string; input: Record<string, unknown>; resultType: string; resolve: () => void; answered: boolean }
  >();
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
        await this.#toolStep(step, where);
      } else if ('console' in step) {
        session.scriptProgress = `${where}: running a console step`;
        try {
          await step.console(this.#emu);
        } catch (err) {
          // The test's own console step failed: its error, as written, fails the test that waits on the session.
          throw new Error(`script ${where} (console) of session ${session.id} threw: ${String(err)}`, { cause: err });
        }
      } else if ('sleepMs' in step) {
        session.scriptProgress = `${where}: sleeping ${step.sleepMs} ms`;
        await this.#sleep(step.sleepMs);
      } else {
        session.append({ type: 'agent.message', content: [{ type: 'text', text: step.message }] });
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

  async #toolStep(step: Extract<ScriptStep<E>, { tool: string }>, where: string): Promise<void> {
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
      ...(step.threadId !== undefined ? { session_thread_id: step.threadId } : {}),
    });
    this.#calls.set(event.id, {
      name: step.tool,
      input,
      resultType: step.custom ? 'user.custom_tool_result' : 'user.tool_result',
      resolve,
      answered: false,
    });
    if (step.permission === 'deny') return;
    session.scriptProgress = `${where}: waiting for the result of ${step.tool} (${type} ${event.id})`;
    session.status = 'idle';
    session.append({
      type: 'session.status_idle',
      stop_reason: { type: 'requires_action', event_ids: [event.id] },
      stop_details: null,
    });
    await this.#until(answered);
    if (session.terminated || this.#stop.aborted) return;
    this.#setStatus('running');
  }

  #setStatus(status: 'running'): void {
    this.#session.status = status;
    this.#session.append({ type: 'session.status_running' });
  }

  /**
   * Resolve when `p` does, the session terminates, or the emulator closes. Both listeners are
   * removed afterwards: the stop signal is shared by every session of the emulator.
   */
  async #until(p: Promise<void>): Promise<void> {
    let unsubscribe: () => unknown = () => undefined;
    let onAbort: (() => void) | undefined;
    const ended = new Promise<void>((resolve) => {
      if (this.#session.terminated || this.#stop.aborted) return resolve();
      onAbort = () => resolve();
      this.#stop.addEventListener('abort', onAbort, { once: true });
      unsubscribe = this.#session.onEvent((ev) => {
        if (ev.type === 'session.status_terminated' || ev.type === 'session.deleted') resolve();
      });
    });
    try {
      await Promise.race([p, ended]);
    } finally {
      unsubscribe();
      if (onAbort) this.#stop.removeEventListener('abort', onAbort);
    }
  }

  async #sleep(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await this.#until(new Promise((resolve) => (timer = setTimeout(resolve, ms).unref())));
    } finally {
      clearTimeout(timer);
    }
  }
}
