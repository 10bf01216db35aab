import { setMaxListeners } from 'node:events';
import Anthropic, { type ClientOptions } from '@anthropic-ai/sdk';
import { ConfigError } from '../../errors.js';
import { Faults } from './faults.js';
import { DEFAULT_MEMORY_LIMITS, type MemoryObject, type MemoryStoreObject, type MemoryWrite } from './model/memory-store.js';
import { multiagentSnapshot, type MultiagentListing } from './model/multiagent.js';
import type { AgentSkillReference, MemoryAccess, SessionEvent, SessionStatus, ThreadStatus, ToolResultRecord } from './model/session.js';
import type { SkillFiles, SkillVersionObject } from './model/skill.js';
import { encodeWorkSecret, type WorkItem, type WorkState } from './model/work-queue.js';
import { Router } from './router.js';
import { environmentRoutes } from './routes/environments.js';
import { eventRoutes } from './routes/events.js';
import { memoryRoutes } from './routes/memories.js';
import { memoryStoreRoutes } from './routes/memory-stores.js';
import { sessionRoutes } from './routes/sessions.js';
import { skillRoutes } from './routes/skills.js';
import { workRoutes } from './routes/work.js';
import { ScriptPlayer, type ScriptStep, type SessionEnd } from './script.js';
import { EmulatorServer, type RequestRecord } from './server.js';
import { EmulatorState, type EmulatorEvents, type EnvironmentType, type StoreAttachment } from './state.js';

/** Options of {@link startEmulator}; every field is optional. */
export interface EmulatorOptions {
  /** Parent folder of derived mount paths (`<mountRoot>/<slug of store name>`). Default `/mnt/memory`. */
  mountRoot?: string;
  /** Delay added before every answer, in ms. Default 0. */
  latencyMs?: number;
  /** Lease TTL the heartbeat reports, in seconds. Default 300, the API's default that the SDK assumes (tests use e.g. 2). */
  leaseTtlSeconds?: number;
  /** Server default for redelivering un-acked polled items, in ms. Default 5000. */
  reclaimOlderThanMs?: number;
  /** Interval of `: keep-alive` comments on event streams, in ms. Default 15 000. */
  keepAliveMs?: number;
  /** Seed of the PRNG that fault rules with `rate < 1` draw from. Default 1. */
  seed?: number;
  /** Largest memory content in UTF-8 bytes. Default 102 400. */
  maxContentBytes?: number;
  /** Most memories per store. Default 2000. */
  maxMemoriesPerStore?: number;
  /** Interface to listen on. Default `127.0.0.1`. */
  host?: string;
  /** Port to listen on. Default 0 (an ephemeral port). */
  port?: number;
}

/** How {@link Emulator.createSession} attaches one store. */
export interface SessionResourceOptions {
  /** The store to attach (`memstore_…`, from `createStore`). */
  memoryStoreId: string;
  /** Default `read_write`. */
  access?: MemoryAccess;
  /** `undefined`: `<mountRoot>/<slug of the store name>`; `null`: no mount path (the SDK then uses its workdir). */
  mountPath?: string | null;
  /** Instructions the session shows the agent for this store, at most 4 096 characters. Default: none (`null`). */
  instructions?: string | null;
}

/** Options of {@link Emulator.createSkill}. */
export interface CreateSkillOptions {
  /** The skill's kebab-case slug: the folder it lands in (`<workdir>/skills/<name>`) and the archive's wrapper folder. */
  name: string;
  /** Relative path → content of the first version; `SKILL.md` is required. */
  files: SkillFiles;
  /** The first version's description. Default `''`. */
  description?: string;
  /** Default `custom` (id `skill_…`); `anthropic` skills keep the `skillId` given (e.g. `xlsx`). */
  type?: 'custom' | 'anthropic';
  /** The skill's id, for an `anthropic` skill. Default: a new `skill_…` id. */
  skillId?: string;
}

/**
 * One skill on a session's agent: a skill created with {@link Emulator.createSkill} (`skillId`,
 * optional `version`: a version id, or `'latest'` passed through as is; default the newest version's
 * id), or inline `{ name, files }`, which creates a new skill for this session.
 */
export type SessionSkillOptions =
  | {
      /** The id of a skill created with {@link Emulator.createSkill}. */
      skillId: string;
      /** A version id, or `'latest'` passed through as is. Default: the newest version's id. */
      version?: string;
    }
  | CreateSkillOptions;

/** One subagent of a multi-agent session's agent (see {@link CreateSessionOptions.subagents}). */
export interface SessionSubagentOptions {
  /** Default `subagent <n>` (1-based). */
  name?: string;
  /** The subagent's own skills, as {@link CreateSessionOptions.skills}. Default none. */
  skills?: SessionSkillOptions[];
}

/** What {@link Emulator.createSkill} returns. */
export interface SkillHandle {
  /** The skill's id. */
  skillId: string;
  /** Id of the version just created (the newest). */
  versionId: string;
  /** The version just created, as the API returns it. */
  version: SkillVersionObject;
}

/** Options of {@link Emulator.createSession}. */
export interface CreateSessionOptions {
  /** Memory stores attached to the session. Default none. */
  resources?: SessionResourceOptions[];
  /** Skills on the session's agent (`agent.skills[]`). Default none (`[]`). */
  skills?: SessionSkillOptions[];
  /**
   * Subagents of the session's agent, each with its own skills: the agent becomes a multi-agent
   * one (`agent.multiagent`, listed as `multiagent` says). Default none (`multiagent: null`).
   */
  subagents?: SessionSubagentOptions[];
  /** How `agent.multiagent` lists `subagents`. Default `'coordinator'`. */
  multiagent?: MultiagentListing;
  /** What the agent does once a worker opens the event stream. Default `[]`. */
  script?: ScriptStep<Emulator>[];
  /** `false`: the work item carries no `secret` (so no sessions token). Default `true`. */
  secret?: boolean;
  /** Default `'terminate'`. */
  end?: SessionEnd;
  /** Environment to create the session on. Default: the emulator's own self-hosted environment. */
  environmentId?: string;
  /** The name of the session's agent. Default `emulator agent`. */
  agentName?: string;
  /** The session's metadata. Default `{}`. */
  metadata?: Record<string, string>;
  /** The session's title. Default: none (`null`). */
  title?: string;
}

/** What {@link Emulator.waitForSession} resolves with. */
export interface SessionOutcome {
  /** The session's status when the wait ended. */
  status: SessionStatus;
  /** True when the session's work item is `stopped`. */
  workStopped: boolean;
  /** Its work item's state, or `null` when the session has no work item. */
  workState: WorkState | null;
  /** Every result posted for a scripted tool call, in arrival order (duplicates included). */
  toolResults: ToolResultRecord[];
}

/** A read-only view of one session. */
export interface SessionSnapshot {
  /** The session's id. */
  id: string;
  /** The session's status. */
  status: SessionStatus;
  /** The id of its work item, or `null` when it has none. */
  workId: string | null;
  /** The session object as `GET /v1/sessions/:id` returns it. */
  object: Record<string, unknown>;
  /** Every result posted for a scripted tool call, in arrival order (duplicates included). */
  toolResults: ToolResultRecord[];
  /** What the scripted agent is doing now. */
  scriptProgress: string;
  /** Open event streams right now. */
  openStreams: number;
  /** Each session thread that sent a status event, by `session_thread_id`: its newest status. */
  threads: Record<string, ThreadStatus>;
}

/** A read-only view of one work item. */
export interface WorkItemSnapshot {
  /** The work item's id. */
  id: string;
  /** The environment whose queue holds it. */
  environmentId: string;
  /** The session it runs (for a healthcheck item, the id it carries). */
  sessionId: string;
  /** What the item asks for: a session to run, or a health check. */
  dataType: 'session' | 'healthcheck';
  /** Where the item is in its life. */
  state: WorkState;
  /** The `secret` a poll hands out, or `null` when created with `secret: false`. */
  secret: string | null;
  /** How many times a poll handed the item out. */
  deliveries: number;
  /** Successful heartbeats. */
  heartbeats: number;
  /** ISO time of the last successful heartbeat, or `null` before the first (and after its lease lapsed). */
  lastHeartbeat: string | null;
  /** True once a worker acknowledged it (an ack, or its first heartbeat). */
  acknowledged: boolean;
  /** True once a stop was asked for (by a worker, or with `stopWork`). */
  stopRequested: boolean;
  /** True once it is `stopped`. */
  stopped: boolean;
}

/**
 * A local emulator of the Managed Agents API subset a self-hosted worker uses. Start it with
 * {@link startEmulator}; see `src/testing/README.md` for the whole API.
 */
export class Emulator {
  /** The emulator's base URL (`http://host:port`): pass it as the SDK client's `baseURL`. */
  readonly baseURL: string;
  /** The emulator's own self-hosted environment. */
  readonly environmentId: string;
  /** That environment's key (what workers poll with). */
  readonly environmentKey: string;
  /** The console credential `client()` uses (an API key that can do everything). */
  readonly apiKey: string;
  /** Fault injection: `faults.add(rule)`, `faults.clear()`. */
  readonly faults: Faults;
  /** Every request received so far, in completion order. */
  readonly requests: RequestRecord[];
  readonly #state: EmulatorState;
  readonly #server: EmulatorServer;
  readonly #stop = new AbortController();
  readonly #players = new Map<string, ScriptPlayer<Emulator>>();
  #closed: Promise<void> | undefined;

  /** @internal Use {@link startEmulator}. */
  constructor(init: {
    state: EmulatorState;
    server: EmulatorServer;
    faults: Faults;
    log: RequestRecord[];
    baseURL: string;
    environmentId: string;
  }) {
    this.#state = init.state;
    this.#server = init.server;
    this.faults = init.faults;
    this.requests = init.log;
    this.baseURL = init.baseURL;
    this.environmentId = init.environmentId;
    this.environmentKey = init.state.environment(init.environmentId).key;
    this.apiKey = init.state.consoleKey;
    // Every scripted agent waiting for a result listens here; dozens at once are no leak.
    setMaxListeners(0, this.#stop.signal);
  }

  /** An SDK client on `baseURL` with the console credential (logging off unless overridden). */
  client(options: ClientOptions = {}): Anthropic {
    return new Anthropic({ apiKey: this.apiKey, baseURL: this.baseURL, logLevel: 'off', ...options });
  }

  /** An SDK client holding only the sessions token of `workIdOrSessionId`'s work item (what a worker uses). */
  sessionClient(workIdOrSessionId: string, options: ClientOptions = {}): Anthropic {
    const token = this.sessionsToken(workIdOrSessionId);
    if (token === null) throw new ConfigError(`work item of ${workIdOrSessionId} was created with secret: false; it has no sessions token`);
    return new Anthropic({ apiKey: null, authToken: token, baseURL: this.baseURL, logLevel: 'off', ...options });
  }

  /** The sessions token of a work item (by work id or session id), or `null` without a secret. */
  sessionsToken(workIdOrSessionId: string): string | null {
    return this.#work(workIdOrSessionId).sessionsToken;
  }

  /** The `secret` a poll hands out for a work item (by work id or session id), or `null`. */
  workSecret(workIdOrSessionId: string): string | null {
    const token = this.#work(workIdOrSessionId).sessionsToken;
    return token === null ? null : encodeWorkSecret(token);
  }

  /** Another environment (self-hosted by default) with its own key. */
  createEnvironment(opts: { name?: string; type?: EnvironmentType } = {}): {
    /** The environment's id (`env_…`). */
    id: string;
    /** Its key, what workers poll with. */
    key: string;
    /** Its type. */
    type: EnvironmentType;
  } {
    const env = this.#state.createEnvironment(opts);
    return { id: env.id, key: env.key, type: env.type };
  }

  /** Create a store, optionally seeded with `{ '/path': content }` memories. */
  async createMemoryStore(opts: {
    name: string;
    description?: string;
    metadata?: Record<string, string>;
    memories?: Record<string, string>;
  }): Promise<MemoryStoreObject> {
    const store = this.#state.createStore({
      name: opts.name,
      ...(opts.description !== undefined ? { description: opts.description } : {}),
      ...(opts.metadata !== undefined ? { metadata: opts.metadata } : {}),
    });
    for (const [path, content] of Object.entries(opts.memories ?? {})) store.create(path, content);
    return store.toObject();
  }

  /**
   * Create a skill with a first version. `GET /v1/skills/:id/versions/:version` serves the version
   * (`latest` resolves to the newest) and `./content` its files as a ustar archive wrapped in one
   * `<name>/` folder. Attach it with `createSession({ skills: [{ skillId }] })`.
   */
  createSkill(opts: CreateSkillOptions): SkillHandle {
    const skill = this.#state.createSkill({
      name: opts.name,
      ...(opts.type !== undefined ? { type: opts.type } : {}),
      ...(opts.skillId !== undefined ? { skillId: opts.skillId } : {}),
    });
    try {
      const version = skill.addVersion(opts.files, opts.description ?? '');
      return { skillId: skill.id, versionId: version.id, version };
    } catch (e) {
      this.#state.skills.delete(skill.id);
      throw e;
    }
  }

  /** Add a version to a skill; it becomes `latest`. */
  addSkillVersion(skillId: string, files: SkillFiles, opts: { description?: string } = {}): SkillVersionObject {
    return this.#state.skill(skillId).addVersion(files, opts.description ?? '');
  }

  /** `{ '/path': content }` of every memory in the store now (the source of truth). */
  memories(storeId: string): Record<string, string> {
    return this.#state.store(storeId).snapshot();
  }

  /**
   * Every write the store took, oldest first (API writes and Console edits alike): `{ seq, op, memoryId,
   * path, content, sha256 }`, `content`/`sha256` null for a delete. Tells whether some bytes ever reached
   * the store, even after a later write replaced them.
   */
  memoryHistory(storeId: string): MemoryWrite[] {
    return this.#state.store(storeId).history();
  }

  /** The memory at `path` (full view), or `undefined`. */
  memory(storeId: string, path: string): MemoryObject | undefined {
    const store = this.#state.store(storeId);
    const record = store.byPath(path);
    return record ? store.memoryObject(record, 'full') : undefined;
  }

  /** Create or overwrite a memory, as an edit made in the Console would. */
  putMemory(storeId: string, path: string, content: string): MemoryObject {
    const store = this.#state.store(storeId);
    return store.memoryObject(store.put(path, content), 'full');
  }

  /** Delete the memory at `path`; false when there was none. */
  removeMemory(storeId: string, path: string): boolean {
    const store = this.#state.store(storeId);
    const record = store.byPath(path);
    if (!record) return false;
    store.delete(record.id);
    return true;
  }

  /** Archive a store (no more memory writes or attachments). */
  archiveMemoryStore(storeId: string): void {
    this.#state.store(storeId).archive();
  }

  /**
   * Create a session with a scripted agent; on a self-hosted environment this queues its work
   * item. The script starts when a worker (a non-console credential) first opens the stream, which
   * may be before the worker has mounted the session's stores: a `console` step that changes a
   * mounted folder belongs after the first tool step.
   */
  async createSession(opts: CreateSessionOptions = {}): Promise<{
    /** The new session's id. */
    sessionId: string;
    /** The id of the work item queued for it, or `''` on a `cloud` environment (no work item). */
    workId: string;
  }> {
    const attachments: StoreAttachment[] = (opts.resources ?? []).map((r) => ({
      memoryStoreId: r.memoryStoreId,
      ...(r.access !== undefined ? { access: r.access } : {}),
      ...('mountPath' in r && r.mountPath !== undefined ? { mountPath: r.mountPath } : {}),
      ...(r.instructions !== undefined ? { instructions: r.instructions } : {}),
    }));
    const skills = this.#skillReferences(opts.skills ?? []);
    const subagents = (opts.subagents ?? []).map((s, i) => ({
      name: s.name ?? `subagent ${i + 1}`,
      skills: this.#skillReferences(s.skills ?? []),
    }));
    const { session, work } = this.#state.createSession({
      environmentId: opts.environmentId ?? this.environmentId,
      attachments,
      skills,
      ...(opts.subagents !== undefined ? { multiagent: multiagentSnapshot(opts.multiagent ?? 'coordinator', subagents) } : {}),
      ...(opts.agentName !== undefined ? { agentName: opts.agentName } : {}),
      ...(opts.metadata !== undefined ? { metadata: opts.metadata } : {}),
      ...(opts.title !== undefined ? { title: opts.title } : {}),
      secret: opts.secret ?? true,
    });
    const player = new ScriptPlayer<Emulator>({
      session,
      steps: opts.script ?? [],
      end: opts.end ?? 'terminate',
      emu: this,
      state: this.#state,
      stop: this.#stop.signal,
    });
    this.#players.set(session.id, player);
    this.#state.onWorkerAttach(session.id, () => player.start());
    return { sessionId: session.id, workId: work?.id ?? '' };
  }

  /** Start a session's script now, without waiting for a worker to open the stream. */
  startScript(sessionId: string): void {
    const player = this.#players.get(sessionId);
    if (!player) throw new ConfigError(`session ${sessionId} has no script (it was not created with emu.createSession)`);
    player.start();
  }

  /**
   * Archive a session: status terminated, `archived_at` set, and no event in its history (the API
   * adds none); its open streams end, and a stream opened later sends `session.status_terminated`.
   */
  archiveSession(sessionId: string): void {
    this.#state.archiveSession(this.#state.session(sessionId));
  }

  /**
   * Terminate a session thread: `session.thread_status_terminated`, its scripted steps stop, and a
   * result posted later for one of its calls is refused (400). A no-op once it is terminated.
   */
  terminateThread(sessionId: string, threadId: string): void {
    const player = this.#players.get(sessionId);
    if (!player) throw new ConfigError(`session ${sessionId} has no script (it was not created with emu.createSession)`);
    player.terminateThread(threadId);
  }

  /**
   * Resolve once the session is terminated **and** its work item is stopped; reject on timeout
   * (naming what it was still waiting for), when the session's script failed, or as soon as its
   * work item is stopped while the session never started (the worker gave the item up).
   */
  async waitForSession(sessionId: string, opts: { timeoutMs?: number } = {}): Promise<SessionOutcome> {
    const timeoutMs = opts.timeoutMs ?? 60_000;
    const session = this.#state.session(sessionId);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const work = session.workId ? this.#state.queue.find(session.workId) : undefined;
      const workStopped = work === undefined || work.state === 'stopped';
      if (session.scriptError) throw session.scriptError;
      const player = this.#players.get(sessionId);
      if (work?.state === 'stopped' && !session.terminated && player !== undefined && !player.started) {
        // The item ended before any worker opened the session's stream: nothing will ever start
        // the script now, so waiting out the timeout would only hide the worker's failure.
        throw new Error(
          `waitForSession(${sessionId}): work item ${work.id} was stopped before the session started ` +
            `(no worker opened its event stream; delivered ${work.deliveries} time(s), acknowledged: ${work.acknowledgedAt !== null}); ` +
            "the worker ended the item without serving it: see its 'workFailed' event or its log (a failed mount, a missing secret, ...)",
        );
      }
      if (session.terminated && workStopped) {
        return {
          status: session.status,
          workStopped: work?.state === 'stopped',
          workState: work?.state ?? null,
          toolResults: [...session.toolResults],
        };
      }
      if (Date.now() >= deadline || this.#stop.signal.aborted) {
        const waiting: string[] = [];
        if (!session.terminated)
          waiting.push(`session status is ${session.status}, waiting for terminated; agent: ${session.scriptProgress}`);
        if (!workStopped) waiting.push(`work item ${work?.id} is ${work?.state}, waiting for stopped`);
        // A failed wait fails the caller's test as an `expect` does: a plain Error, not a library failure.
        throw new Error(
          `waitForSession(${sessionId}) ${this.#stop.signal.aborted ? 'interrupted by close()' : `timed out after ${timeoutMs} ms`}: ${waiting.join('; ')}`,
        );
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** A read-only view of a session. */
  session(sessionId: string): SessionSnapshot {
    const s = this.#state.session(sessionId);
    return {
      id: s.id,
      status: s.status,
      workId: s.workId,
      object: s.toObject(),
      toolResults: [...s.toolResults],
      scriptProgress: s.scriptProgress,
      openStreams: s.hub.size,
      threads: Object.fromEntries(s.threads),
    };
  }

  /** The session's event history (copies). */
  events(sessionId: string): SessionEvent[] {
    return this.#state.session(sessionId).events.map((e) => ({ ...e }));
  }

  /** Append an event to a session's history and broadcast it (e.g. a `user.message`). */
  emitEvent(sessionId: string, event: { type: string } & Record<string, unknown>): SessionEvent {
    return this.#state.session(sessionId).append(event);
  }

  /** A read-only view of a work item (by work id or session id). */
  workItem(workIdOrSessionId: string): WorkItemSnapshot {
    const w = this.#work(workIdOrSessionId);
    return {
      id: w.id,
      environmentId: w.environmentId,
      sessionId: w.data.id,
      dataType: w.data.type,
      state: w.state,
      secret: w.sessionsToken === null ? null : encodeWorkSecret(w.sessionsToken),
      deliveries: w.deliveries,
      heartbeats: w.heartbeats,
      lastHeartbeat: w.lastHeartbeat,
      acknowledged: w.acknowledgedAt !== null,
      stopRequested: w.stopRequestedAt !== null,
      stopped: w.state === 'stopped',
    };
  }

  /** Every work item, oldest first. */
  workItems(): WorkItemSnapshot[] {
    return this.#state.queue.all().map((w) => this.workItem(w.id));
  }

  /** Queue another work item: for an existing session (new input), or a healthcheck. */
  enqueue(opts: { sessionId?: string; type?: 'session' | 'healthcheck'; environmentId?: string; secret?: boolean }): string {
    if ((opts.type ?? 'session') === 'session') {
      if (!opts.sessionId) throw new ConfigError('enqueue: sessionId is required for a session work item');
      return this.#state.enqueueSessionWork(this.#state.session(opts.sessionId), opts.secret ?? true).id;
    }
    return this.#state.enqueueHealthcheck(opts.environmentId ?? this.environmentId, opts.secret ?? false).id;
  }

  /** Stop a work item as the API would (graceful: `stopping`, force: `stopped`). */
  stopWork(workIdOrSessionId: string, opts: { force?: boolean } = {}): void {
    this.#state.queue.stop(this.#work(workIdOrSessionId), opts.force === true);
  }

  /** Void a work item's lease: its holder's next heartbeat answers 412. */
  loseLease(workIdOrSessionId: string): void {
    this.#state.queue.loseLease(this.#work(workIdOrSessionId));
  }

  /** Cut every open event stream of a session (the client sees a network error); returns how many. */
  dropStreams(sessionId: string): number {
    return this.#state.session(sessionId).hub.cutAll();
  }

  /** Forget the request log so far. */
  clearRequests(): void {
    this.requests.length = 0;
  }

  /**
   * Throw if anything is left pending: queued work items nobody acknowledged, or scripted
   * sessions whose agent has not finished.
   */
  expectNoPending(): void {
    const pending: string[] = [];
    for (const w of this.#state.queue.all()) {
      if (w.state === 'queued') pending.push(`work item ${w.id} (session ${w.data.id}) is still queued`);
    }
    for (const [id, player] of this.#players) {
      const s = this.#state.sessions.get(id);
      if (s && !s.terminated && player.started) pending.push(`session ${id} is ${s.status}: ${s.scriptProgress}`);
    }
    // A failed expectation fails the caller's test as an `expect` does: a plain Error, not a library failure.
    if (pending.length > 0) throw new Error(`emulator has pending work:\n- ${pending.join('\n- ')}`);
  }

  /** Listen to emulator events: `sessionCreated`, `sessionTerminated`, `workChanged`. */
  on<K extends keyof EmulatorEvents>(event: K, listener: (...args: EmulatorEvents[K]) => void): this {
    (this.#state.events.on as (e: K, l: (...args: EmulatorEvents[K]) => void) => unknown)(event, listener);
    return this;
  }

  /** Stop a listener added with `on`. */
  off<K extends keyof EmulatorEvents>(event: K, listener: (...args: EmulatorEvents[K]) => void): this {
    (this.#state.events.off as (e: K, l: (...args: EmulatorEvents[K]) => void) => unknown)(event, listener);
    return this;
  }

  /** End open streams and long polls, stop scripts, close the server. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#stop.abort();
      for (const s of this.#state.sessions.values()) s.hub.endAll();
      await this.#server.close();
    })();
    return this.#closed;
  }

  /** The `skills[]` entries of an agent: skills created here are resolved to their versions. */
  #skillReferences(list: SessionSkillOptions[]): AgentSkillReference[] {
    return list.map((s) => {
      if ('files' in s) {
        const created = this.createSkill(s);
        return { skill_id: created.skillId, type: s.type ?? 'custom', version: created.versionId };
      }
      const skill = this.#state.skill(s.skillId);
      if (s.version === 'latest') return { skill_id: skill.id, type: skill.type, version: 'latest' };
      return skill.reference(s.version ?? 'latest');
    });
  }

  #work(workIdOrSessionId: string): WorkItem {
    const direct = this.#state.queue.find(workIdOrSessionId);
    if (direct) return direct;
    const session = this.#state.sessions.get(workIdOrSessionId);
    const viaSession = session?.workId ? this.#state.queue.find(session.workId) : undefined;
    if (viaSession) return viaSession;
    throw new ConfigError(`no work item ${workIdOrSessionId} (nor a session with that id that has one)`);
  }
}

/** Start an emulator on 127.0.0.1 (ephemeral port by default). */
export async function startEmulator(options: EmulatorOptions = {}): Promise<Emulator> {
  const state = new EmulatorState({
    mountRoot: options.mountRoot ?? '/mnt/memory',
    ...(options.leaseTtlSeconds !== undefined ? { leaseTtlSeconds: options.leaseTtlSeconds } : {}),
    ...(options.reclaimOlderThanMs !== undefined ? { reclaimOlderThanMs: options.reclaimOlderThanMs } : {}),
    ...(options.keepAliveMs !== undefined ? { keepAliveMs: options.keepAliveMs } : {}),
    limits: {
      maxContentBytes: options.maxContentBytes ?? DEFAULT_MEMORY_LIMITS.maxContentBytes,
      maxMemoriesPerStore: options.maxMemoriesPerStore ?? DEFAULT_MEMORY_LIMITS.maxMemoriesPerStore,
    },
  });
  const env = state.createEnvironment({ name: 'emulator', type: 'self_hosted' });
  const router = new Router();
  router.add(...workRoutes, ...environmentRoutes, ...sessionRoutes, ...eventRoutes, ...memoryStoreRoutes, ...memoryRoutes, ...skillRoutes);
  const faults = new Faults(options.seed ?? 1);
  const log: RequestRecord[] = [];
  const server = new EmulatorServer({ state, router, faults, latencyMs: options.latencyMs ?? 0, log });
  const host = options.host ?? '127.0.0.1';
  const port = await server.listen(host, options.port ?? 0);
  return new Emulator({ state, server, faults, log, baseURL: `http://${host}:${port}`, environmentId: env.id });
}
