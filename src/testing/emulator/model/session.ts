import { isoTime, newId } from '../ids.js';
import { StreamHub } from '../sse.js';

/** A session's status, as the API reports it: `idle` until it runs, `running`, `rescheduling`, `terminated` at its end. */
export type SessionStatus = 'rescheduling' | 'running' | 'idle' | 'terminated';
/** What a session may do to an attached memory store: `read_write`, or `read_only`. */
export type MemoryAccess = 'read_write' | 'read_only';

/** A memory store attached to a session, as snapshotted at attach time. */
export interface SessionStoreResource {
  memoryStoreId: string;
  name: string;
  description: string;
  mountPath: string | null;
  access: MemoryAccess;
  instructions: string | null;
}

/** A persisted session event: any object with `type`, plus `id` and `processed_at`. */
export type SessionEvent = {
  /** The event's id. */
  id: string;
  /** The event's type (`agent.message`, `session.status_idle`, …). */
  type: string;
  /** ISO time the event was stored. */
  processed_at: string;
} & Record<string, unknown>;

/** One tool result the scripted agent received. */
export interface ToolResultRecord {
  /** The tool name of the scripted step. */
  name: string;
  /** The tool input of the scripted step. */
  input: Record<string, unknown>;
  /** `is_error` of the posted result. */
  isError: boolean;
  /** The text blocks of the posted result, joined with `\n`. */
  text: string;
  /** The id of the `agent.tool_use` / `agent.custom_tool_use` event answered. */
  toolUseId: string;
  /** The posted `content` blocks, as sent. */
  content: unknown[];
  /** `session_thread_id` of the call, or `null` for a call of the primary thread. */
  threadId: string | null;
  /** When the call's tool-use event was emitted (`Date.now()` ms). */
  calledAtMs: number;
  /** When this result arrived (`Date.now()` ms). */
  answeredAtMs: number;
}

/** The newest status of a session thread, from its `session.thread_status_*` events. */
export type ThreadStatus = 'running' | 'idle' | 'rescheduled' | 'terminated';

/**
 * One session: status, attached stores, the ordered event history, the open streams, and the
 * bookkeeping of its scripted agent.
 */
export class Session {
  readonly id = newId('sesn');
  readonly environmentId: string;
  readonly resources: SessionStoreResource[];
  readonly agent: Record<string, unknown>;
  readonly metadata: Record<string, string>;
  readonly title: string | null;
  readonly createdAt = isoTime();
  updatedAt = this.createdAt;
  archivedAt: string | null = null;
  status: SessionStatus = 'idle';
  workId: string | null = null;
  readonly events: SessionEvent[] = [];
  readonly hub: StreamHub;
  /** Every tool result posted for a scripted call, in arrival order (duplicates included). */
  readonly toolResults: ToolResultRecord[] = [];
  /** Set when the scripted agent failed (a `console` step threw). */
  scriptError: Error | undefined;
  /** What the scripted agent is doing, for timeout messages. */
  scriptProgress = 'not started (no worker has opened the event stream yet)';
  /** Each thread that sent a status event, by `session_thread_id`: its newest status. */
  readonly threads = new Map<string, ThreadStatus>();
  /** The thread of each call made on a thread, by tool-use event id. */
  readonly #callThreads = new Map<string, string>();
  readonly #listeners = new Set<(event: SessionEvent) => void>();
  readonly #endListeners = new Set<() => void>();

  constructor(init: {
    environmentId: string;
    resources: SessionStoreResource[];
    agent: Record<string, unknown>;
    metadata?: Record<string, string>;
    title?: string | null;
    keepAliveMs: number;
  }) {
    this.environmentId = init.environmentId;
    this.resources = init.resources;
    this.agent = init.agent;
    this.metadata = { ...(init.metadata ?? {}) };
    this.title = init.title ?? null;
    this.hub = new StreamHub(init.keepAliveMs);
  }

  get terminated(): boolean {
    return this.status === 'terminated';
  }

  /** Persist an event (new `id`, `processed_at`), broadcast it, and tell listeners. */
  append(event: { type: string } & Record<string, unknown>): SessionEvent {
    const stored: SessionEvent = { ...event, id: newId('sevt'), processed_at: isoTime() };
    this.events.push(stored);
    this.updatedAt = stored.processed_at;
    this.#trackThreads(stored);
    this.hub.broadcast(stored);
    for (const listener of [...this.#listeners]) listener(stored);
    return stored;
  }

  /** Call `listener` for every event appended from now on; returns the unsubscribe function. */
  onEvent(listener: (event: SessionEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Call `listener` once when the session terminates, is archived or deleted; returns the unsubscribe function. */
  onEnd(listener: () => void): () => void {
    this.#endListeners.add(listener);
    return () => this.#endListeners.delete(listener);
  }

  /** Mark terminated, emit `session.status_terminated`, then end the open streams. */
  terminate(): void {
    if (this.terminated) return;
    this.status = 'terminated';
    this.append({ type: 'session.status_terminated' });
    this.hub.endAll();
    this.#ended();
  }

  /**
   * Archive: terminated, `archived_at` set, and **no event** in the history (the API adds none, so
   * only the session's status shows it). The open streams end cleanly, so a reader reconnects and
   * reads the status.
   */
  archive(): void {
    this.archivedAt ??= isoTime();
    if (this.terminated) return;
    this.status = 'terminated';
    this.updatedAt = this.archivedAt;
    this.hub.endAll();
    this.#ended();
  }

  /** Deleted: `session.deleted` in the history, the open streams ended. */
  markDeleted(): void {
    if (this.terminated) return;
    this.status = 'terminated';
    this.append({ type: 'session.deleted' });
    this.hub.endAll();
    this.#ended();
  }

  /**
   * The terminated thread whose call `event` (a `user.tool_result` / `user.custom_tool_result`)
   * answers, or `undefined` when the call's thread still accepts input (or the call has no thread).
   */
  terminatedThreadOf(event: { type: string } & Record<string, unknown>): string | undefined {
    const callId = event.type === 'user.tool_result' ? event['tool_use_id'] : event['custom_tool_use_id'];
    const thread = typeof callId === 'string' ? this.#callThreads.get(callId) : undefined;
    return thread !== undefined && this.threads.get(thread) === 'terminated' ? thread : undefined;
  }

  #trackThreads(ev: SessionEvent): void {
    const thread = ev['session_thread_id'];
    if (typeof thread !== 'string' || thread === '') return;
    if (ev.type === 'agent.tool_use' || ev.type === 'agent.custom_tool_use') this.#callThreads.set(ev.id, thread);
    const status = THREAD_STATUS_OF_EVENT[ev.type];
    if (status !== undefined) this.threads.set(thread, status);
  }

  #ended(): void {
    for (const listener of [...this.#endListeners]) listener();
    this.#endListeners.clear();
  }

  toObject(): Record<string, unknown> {
    return {
      id: this.id,
      type: 'session',
      environment_id: this.environmentId,
      status: this.status,
      resources: this.resources.map((r) => ({
        type: 'memory_store',
        memory_store_id: r.memoryStoreId,
        name: r.name,
        description: r.description,
        mount_path: r.mountPath,
        access: r.access,
        instructions: r.instructions,
      })),
      agent: this.agent,
      archived_at: this.archivedAt,
      created_at: this.createdAt,
      updated_at: this.updatedAt,
      metadata: { ...this.metadata },
      title: this.title,
      stats: {},
      usage: {},
      outcome_evaluations: [],
      budget: null,
      vault_ids: [],
      deployment_id: null,
    };
  }
}

const THREAD_STATUS_OF_EVENT: Record<string, ThreadStatus | undefined> = {
  'session.thread_status_running': 'running',
  'session.thread_status_idle': 'idle',
  'session.thread_status_rescheduled': 'rescheduled',
  'session.thread_status_terminated': 'terminated',
};

/** One entry of the resolved agent's `skills[]`, as the SDK's `BetaManagedAgents{Custom,Anthropic}Skill`. */
export interface AgentSkillReference {
  /** The skill's id. */
  skill_id: string;
  /** `custom` for a skill made with `createSkill`, `anthropic` for a built-in one. */
  type: 'custom' | 'anthropic';
  /** The version the agent uses: a version id, or `latest`. */
  version: string;
}

/** The resolved agent snapshot a session carries (`agent.skills` is always present, `[]` by default). */
export function agentSnapshot(agentId: string, name: string, skills: AgentSkillReference[] = []): Record<string, unknown> {
  return {
    id: agentId,
    type: 'agent',
    name,
    version: 1,
    description: null,
    system: null,
    model: { id: 'claude-sonnet-4-5', speed: 'standard' },
    tools: [
      { type: 'agent_toolset_20260401', configs: [], default_config: { enabled: true, permission_policy: { type: 'always_allow' } } },
    ],
    mcp_servers: [],
    skills: skills.map((s) => ({ ...s })),
    multiagent: null,
    // The default execution principal: an object, never null (the SDKs' types require one).
    execution_identity: { type: 'service_account' },
  };
}
