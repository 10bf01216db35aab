import { EventEmitter } from 'node:events';
import { API_LIMITS } from '../../internal/defaults.js';
import { CredentialRegistry } from './auth.js';
import { invalidRequest, notFound } from './errors.js';
import { isoTime, newId, randomToken } from './ids.js';
import { DEFAULT_MEMORY_LIMITS, MemoryStore, type MemoryLimits } from './model/memory-store.js';
import { Session, agentSnapshot, type AgentSkillReference, type MemoryAccess, type SessionStoreResource } from './model/session.js';
import { Skill } from './model/skill.js';
import { WorkQueue, type WorkItem } from './model/work-queue.js';

/** An environment's type: `self_hosted` queues a work item per session for workers to claim; `cloud` queues none. */
export type EnvironmentType = 'self_hosted' | 'cloud';

/** An environment and the key its workers poll with. */
export interface EnvironmentRecord {
  id: string;
  name: string;
  type: EnvironmentType;
  key: string;
  description: string | null;
  metadata: Record<string, string>;
  createdAt: string;
  updatedAt: string;
  archivedAt: string | null;
}

/** How a session attaches one store (internal, already validated shape). */
export interface StoreAttachment {
  memoryStoreId: string;
  access?: MemoryAccess | null;
  /** `undefined`: `<mountRoot>/<slug of the store name>`; `null`: no mount path. */
  mountPath?: string | null;
  instructions?: string | null;
}

/** Events the emulator emits (`emu.on(name, listener)`). */
export interface EmulatorEvents {
  /** A session was created (by the emulator's API or `createSession`). */
  sessionCreated: [
    {
      /** The new session's id. */
      sessionId: string;
      /** The work item queued for it, or `null` on a `cloud` environment. */
      workId: string | null;
      /** The environment it was created on. */
      environmentId: string;
    },
  ];
  /** A session reached `terminated`. */
  sessionTerminated: [
    {
      /** The session's id. */
      sessionId: string;
    },
  ];
  /** A work item changed state. */
  workChanged: [
    {
      /** The work item's id. */
      workId: string;
      /** Its new state. */
      state: WorkItem['state'];
    },
  ];
}

export interface StateOptions {
  mountRoot: string;
  leaseTtlSeconds: number;
  reclaimOlderThanMs: number;
  keepAliveMs: number;
  limits: MemoryLimits;
}

/** The lease TTL the API grants when the worker asks for none (the SDK's own assumption since 1.16). */
export const DEFAULT_LEASE_TTL_SECONDS = 300;

/** Maximum memory stores on one session (product docs). */
export const MAX_STORES_PER_SESSION = API_LIMITS.storesPerSession;

/** Lowercase; every run of characters outside `[a-z0-9]` becomes one `-`; no `-` at either end. */
export function slugOf(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/** Everything the emulator knows, and the operations both the routes and `emu.*` helpers use. */
export class EmulatorState {
  readonly opts: StateOptions;
  readonly events = new EventEmitter<EmulatorEvents>();
  readonly credentials = new CredentialRegistry();
  readonly consoleKey = `sk-ant-api-emulator-${randomToken(32)}`;
  readonly environments = new Map<string, EnvironmentRecord>();
  readonly sessions = new Map<string, Session>();
  readonly stores = new Map<string, MemoryStore>();
  readonly skills = new Map<string, Skill>();
  readonly queue: WorkQueue;
  /** Called once, when a worker credential first opens a session's event stream. */
  readonly #attachHooks = new Map<string, () => void>();

  constructor(opts: Partial<StateOptions> & { mountRoot: string }) {
    this.opts = {
      leaseTtlSeconds: DEFAULT_LEASE_TTL_SECONDS,
      reclaimOlderThanMs: 5000,
      keepAliveMs: 15_000,
      limits: DEFAULT_MEMORY_LIMITS,
      ...opts,
    };
    this.credentials.add(this.consoleKey, { kind: 'console' });
    this.queue = new WorkQueue({
      leaseTtlSeconds: this.opts.leaseTtlSeconds,
      reclaimOlderThanMs: this.opts.reclaimOlderThanMs,
      onChange: (item) => this.emit('workChanged', { workId: item.id, state: item.state }),
    });
  }

  /** Emit to `emu.on(...)` listeners; a throwing listener is reported, never breaks the request. */
  emit<K extends keyof EmulatorEvents>(event: K, ...args: EmulatorEvents[K]): void {
    for (const listener of this.events.listeners(event)) {
      try {
        (listener as (...a: EmulatorEvents[K]) => void)(...args);
      } catch (err) {
        process.emitWarning(`emulator ${event} listener threw: ${String(err)}`);
      }
    }
  }

  createEnvironment(
    init: { name?: string; type?: EnvironmentType; description?: string | null; metadata?: Record<string, string> } = {},
  ): EnvironmentRecord {
    const now = isoTime();
    const env: EnvironmentRecord = {
      id: newId('env'),
      name: init.name ?? 'emulator environment',
      type: init.type ?? 'self_hosted',
      key: `sk-ant-env-emulator-${randomToken(32)}`,
      description: init.description ?? null,
      metadata: { ...(init.metadata ?? {}) },
      createdAt: now,
      updatedAt: now,
      archivedAt: null,
    };
    this.environments.set(env.id, env);
    this.credentials.add(env.key, { kind: 'environment_key', environmentId: env.id });
    return env;
  }

  environment(environmentId: string): EnvironmentRecord {
    const env = this.environments.get(environmentId);
    if (!env) throw notFound(`environment ${environmentId} does not exist`);
    return env;
  }

  environmentObject(env: EnvironmentRecord): Record<string, unknown> {
    return {
      id: env.id,
      type: 'environment',
      name: env.name,
      description: env.description,
      config: { type: env.type },
      metadata: { ...env.metadata },
      created_at: env.createdAt,
      updated_at: env.updatedAt,
      archived_at: env.archivedAt,
    };
  }

  createStore(init: { name: string; description?: string; metadata?: Record<string, string> }): MemoryStore {
    const store = new MemoryStore({ ...init, limits: this.opts.limits });
    this.stores.set(store.id, store);
    return store;
  }

  store(storeId: string): MemoryStore {
    const store = this.stores.get(storeId);
    if (!store) throw notFound(`memory store ${storeId} does not exist`);
    return store;
  }

  /** A new skill (no versions yet). An `anthropic` skill keeps the id it is given (e.g. `xlsx`). */
  createSkill(init: { name: string; type?: 'custom' | 'anthropic'; skillId?: string }): Skill {
    if (init.skillId !== undefined && this.skills.has(init.skillId)) throw invalidRequest(`skill ${init.skillId} already exists`);
    const skill = new Skill(init);
    this.skills.set(skill.id, skill);
    return skill;
  }

  skill(skillId: string): Skill {
    const skill = this.skills.get(skillId);
    if (!skill) throw notFound(`skill ${skillId} does not exist`);
    return skill;
  }

  session(sessionId: string): Session {
    const session = this.sessions.get(sessionId);
    if (!session) throw notFound(`session ${sessionId} does not exist`);
    return session;
  }

  /**
   * Create a session on `environmentId` with `attachments`; on a self-hosted environment this
   * queues its work item.
   */
  createSession(init: {
    environmentId: string;
    attachments: StoreAttachment[];
    agentId?: string;
    agentName?: string;
    /** The resolved agent's `skills[]` (concrete versions). Default none. */
    skills?: AgentSkillReference[];
    /** The resolved agent's `multiagent` (its subagents). Default `null`. */
    multiagent?: Record<string, unknown>;
    metadata?: Record<string, string>;
    title?: string | null;
    secret?: boolean;
  }): { session: Session; work: WorkItem | null } {
    const env = this.environment(init.environmentId);
    if (env.archivedAt !== null) throw invalidRequest(`environment ${env.id} is archived; sessions cannot be created on it`);
    if (init.attachments.length > MAX_STORES_PER_SESSION) {
      throw invalidRequest(`a session may attach at most ${MAX_STORES_PER_SESSION} memory stores; got ${init.attachments.length}`);
    }
    const seen = new Set<string>();
    const resources: SessionStoreResource[] = init.attachments.map((a) => {
      if (seen.has(a.memoryStoreId)) throw invalidRequest(`memory store ${a.memoryStoreId} is attached twice`);
      seen.add(a.memoryStoreId);
      const store = this.stores.get(a.memoryStoreId);
      if (!store) throw invalidRequest(`resources: memory store ${a.memoryStoreId} does not exist`);
      if (store.archivedAt !== null) throw invalidRequest(`resources: memory store ${store.id} is archived and cannot be attached`);
      if (a.instructions != null && a.instructions.length > 4096) {
        throw invalidRequest(`resources: instructions for ${store.id} exceed 4096 characters`);
      }
      const slug = slugOf(store.name) || store.id;
      return {
        memoryStoreId: store.id,
        name: store.name,
        description: store.description,
        mountPath: a.mountPath === undefined ? `${this.opts.mountRoot.replace(/\/+$/, '')}/${slug}` : a.mountPath,
        access: a.access ?? 'read_write',
        instructions: a.instructions ?? null,
      };
    });
    const session = new Session({
      environmentId: env.id,
      resources,
      agent: {
        ...agentSnapshot(init.agentId ?? newId('agent'), init.agentName ?? 'emulator agent', init.skills ?? []),
        ...(init.multiagent !== undefined ? { multiagent: init.multiagent } : {}),
      },
      ...(init.metadata !== undefined ? { metadata: init.metadata } : {}),
      ...(init.title !== undefined ? { title: init.title } : {}),
      keepAliveMs: this.opts.keepAliveMs,
    });
    this.sessions.set(session.id, session);
    let work: WorkItem | null = null;
    if (env.type === 'self_hosted') {
      work = this.enqueueSessionWork(session, init.secret ?? true);
    }
    this.emit('sessionCreated', { sessionId: session.id, workId: work?.id ?? null, environmentId: env.id });
    return { session, work };
  }

  /** Queue a (new) work item for an existing session. */
  enqueueSessionWork(session: Session, withSecret: boolean): WorkItem {
    const work = this.queue.enqueue(session.environmentId, { type: 'session', id: session.id }, withSecret);
    session.workId = work.id;
    if (work.sessionsToken !== null) {
      this.credentials.add(work.sessionsToken, {
        kind: 'sessions_token',
        environmentId: session.environmentId,
        workId: work.id,
        sessionId: session.id,
      });
    }
    return work;
  }

  /**
   * Queue a healthcheck item on `environmentId`. With a secret, its sessions token is issued like
   * a session item's: it reaches that work item only (no session, no store).
   */
  enqueueHealthcheck(environmentId: string, withSecret: boolean): WorkItem {
    const env = this.environment(environmentId);
    const work = this.queue.enqueue(env.id, { type: 'healthcheck', id: `hc_${randomToken(12)}` }, withSecret);
    if (work.sessionsToken !== null) {
      this.credentials.add(work.sessionsToken, { kind: 'sessions_token', environmentId: env.id, workId: work.id });
    }
    return work;
  }

  /** Archive: `archived_at` set, status terminated, no event in the history (only the status shows it). */
  archiveSession(session: Session): void {
    const wasTerminated = session.terminated;
    session.archive();
    if (!wasTerminated) this.emit('sessionTerminated', { sessionId: session.id });
  }

  terminateSession(session: Session): void {
    if (session.terminated) return;
    session.terminate();
    this.emit('sessionTerminated', { sessionId: session.id });
  }

  /** Run `hook` the first time a worker (not the console) opens `sessionId`'s event stream. */
  onWorkerAttach(sessionId: string, hook: () => void): void {
    this.#attachHooks.set(sessionId, hook);
  }

  workerAttached(session: Session): void {
    const hook = this.#attachHooks.get(session.id);
    if (!hook) return;
    this.#attachHooks.delete(session.id);
    hook();
  }

  /** The resource entry of `storeId` on the session a sessions token belongs to, if attached. */
  attachment(sessionId: string | undefined, storeId: string): SessionStoreResource | undefined {
    if (sessionId === undefined) return undefined;
    return this.sessions.get(sessionId)?.resources.find((r) => r.memoryStoreId === storeId);
  }
}
