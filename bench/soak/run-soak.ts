/**
 * Runs the fault soak: sessions drawn from a seed are served by our EnvironmentWorker (real SDK
 * client, real HTTP to the emulator, temp mount parent) while fault rules fail, drop, cut and hang
 * requests, agents edit, create and delete files and Console edits land; then it gathers what the
 * emulator and the disk show and hands it to {@link judgeSoak}.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import type { BetaRunnableTool, BetaToolRunContext } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import pino from 'pino';
import { slug } from '../../src/memory/mount/mounter.js';
import { startEmulator, type Emulator, type FaultHandle, type ScriptStep } from '../../src/testing/index.js';
import { EnvironmentWorker } from '../../src/worker/environment-worker.js';
import { judgeSoak, type EditOnDisk, type SoakVerdict, type StoreObservation } from './invariants.js';
import { AGENT_TAG, planSessions, type SessionPlan } from './scenario.js';
import { taggedFiles } from './tagged-files.js';

export interface SoakOptions {
  sessions: number;
  seed: number;
  /** Sessions the worker serves at once. */
  concurrency: number;
  /** Longest pause an agent takes between two steps, in ms. */
  maxSleepMs: number;
  /** Give up waiting for the sessions after this long, in ms (the unfinished ones are violations). */
  deadlineMs: number;
  /** Where the agents' tools run. Default: the worker's default (`'auto'`). */
  sandbox?: 'auto' | 'bwrap' | 'none';
  /** Keep the temp folder (mounts, state, worker log) afterwards; it is kept anyway when an invariant breaks. */
  keep?: boolean;
  /** Progress lines (one per finished session batch). */
  progress?: (line: string) => void;
}

export const SOAK_DEFAULTS: SoakOptions = { sessions: 200, seed: 1, concurrency: 16, maxSleepMs: 6_000, deadlineMs: 600_000 };

/** What was injected and what happened, for the table. */
export interface SoakStats {
  durationMs: number;
  sessionsEndedByAgent: number;
  sessionsEndedByFailure: number;
  itemsClaimed: number;
  itemsFailed: number;
  leaseLosses: number;
  memoryRequests: number;
  memoryFailed: number;
  workRequests: number;
  workFailed: number;
  lostResponses: number;
  hangs: number;
  streamDrops: number;
  leaseLossesInjected: number;
  toolCalls: number;
  resultsPostedTwice: number;
  uploads: number;
  conflicts: number;
  deletes: number;
  flushCutOffs: number;
  copies: number;
  /** Files whose last change was the agent deleting them, and how many of those the store still holds at the end (no Console write to them). */
  agentDeletes: number;
  agentDeletesNotApplied: number;
  /** Of those, how many were in a session whose work item was delivered more than once. */
  agentDeletesNotAppliedRedelivered: number;
  /** Why each failed item failed (not an invariant: a failed item must only lose nothing). */
  itemFailures: string[];
}

export interface SoakResult {
  verdict: SoakVerdict;
  stats: SoakStats;
  /** The temp folder, when kept. */
  keptAt: string | undefined;
}

interface StoreInfo {
  storeId: string;
  root: string;
}

const MEMORY_ROUTE = /^[A-Z]+ \/v1\/memory_stores\/[^/]+\/memories/;
const WORK_ROUTE = /^[A-Z]+ \/v1\/environments\/[^/]+\/work\/(poll|[^/]+\/(ack|heartbeat|stop))$/;

export async function runSoak(options: Partial<SoakOptions> = {}): Promise<SoakResult> {
  const opts: SoakOptions = { ...SOAK_DEFAULTS, ...options };
  const started = performance.now();
  const base = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-soak-'));
  const mountRoot = path.join(base, 'mnt');
  const workdir = path.join(base, 'work');
  const stateDir = path.join(base, 'state');
  await fsp.mkdir(mountRoot);
  await fsp.mkdir(workdir);

  const rejections: string[] = [];
  const onRejection = (reason: unknown): void => {
    rejections.push(reason instanceof Error ? `${reason.name}: ${reason.message}` : String(reason));
  };
  process.on('unhandledRejection', onRejection);
  // An error nobody handles (an 'error' event without a listener) would end the soak's process:
  // count it as a broken invariant and go on, so the run still reports everything else.
  const onUncaught = (err: Error): void => {
    rejections.push(`uncaught ${err.name}: ${err.message}`);
  };
  process.on('uncaughtException', onUncaught);

  const emu = await startEmulator({ mountRoot, leaseTtlSeconds: 4, reclaimOlderThanMs: 2_000, seed: opts.seed });
  const logFile = path.join(base, 'worker.log');
  const logger = pino({ level: 'warn' }, pino.destination({ dest: logFile, sync: true }));
  let worker: EnvironmentWorker | undefined;
  let keepBase = opts.keep === true;
  try {
    const plans = planSessions({ sessions: opts.sessions, seed: opts.seed, maxSleepMs: opts.maxSleepMs });
    const sessions = await createSessions(emu, plans, mountRoot);
    const storeOf = new Map<string, StoreInfo>();
    for (const s of sessions) for (const st of s.stores) storeOf.set(st.root, st);
    const agentWrites = new Map<string, { storeId: string; path: string }>();
    for (const s of sessions) {
      for (const step of s.plan.steps) {
        if (step.kind === 'write') agentWrites.set(step.content, { storeId: s.stores[step.store]!.storeId, path: step.path });
      }
    }

    const toolRuns = new Map<string, number>();
    // Which item run (one tools-factory call per run) executed each tool call, to tell a re-run
    // after a redelivery from a second run inside one item.
    const toolRunOwners = new Map<string, number[]>();
    let itemRuns = 0;
    worker = new EnvironmentWorker(
      {
        client: new Anthropic({ apiKey: emu.apiKey, baseURL: emu.baseURL, timeout: 15_000, maxRetries: 2, logLevel: 'off' }),
        environmentId: emu.environmentId,
        environmentKey: emu.environmentKey,
        workdir,
        stateDir,
        concurrency: opts.concurrency,
        memorySyncIntervalMs: 5_000,
        finalFlushMs: 8_000,
        logger,
        ...(opts.sandbox !== undefined ? { sandbox: opts.sandbox } : {}),
      },
      {
        // Counts every real run of the session's own tools (sandboxed when the sandbox is on).
        wrapTools: (tools) => {
          const run = ++itemRuns;
          return tools.map((t) => countRuns(t, toolRuns, toolRunOwners, run));
        },
      },
    );

    // What the agent had on disk when each item's run ended: read right before the folders go.
    const edits: EditOnDisk[] = [];
    const rootsOfWork = new Map<string, { sessionId: string; roots: string[]; read: boolean }>();
    worker.on('mounted', (e) => {
      const entry = rootsOfWork.get(e.workId) ?? { sessionId: e.sessionId, roots: [], read: false };
      entry.roots.push(e.root);
      rootsOfWork.set(e.workId, entry);
    });
    const readDisk = (workId: string): void => {
      const entry = rootsOfWork.get(workId);
      if (!entry || entry.read) return;
      entry.read = true;
      for (const root of entry.roots) {
        const store = storeOf.get(root);
        if (store)
          for (const [rel, content] of taggedFiles(root, AGENT_TAG))
            edits.push({ storeId: store.storeId, path: rel, content, sessionId: entry.sessionId });
      }
    };
    worker.on('synced', (e) => {
      if (e.storeId === undefined && e.phase === 'flush') readDisk(e.workId);
    });
    worker.on('flushCutOff', (e) => readDisk(e.workId));
    const failedSessions = new Set<string>();
    const itemFailures: string[] = [];
    worker.on('workFailed', (e) => {
      if (e.sessionId) failedSessions.add(e.sessionId);
      itemFailures.push(`${e.workId}: ${e.error.message}`);
    });

    const faults = addFaults(emu);
    const running = worker.run();
    const endedByFailure = await waitForSessions(emu, sessions, opts, failedSessions);
    for (const f of faults.all) f.remove();
    await worker.close();
    await running;

    // The agent's last version of every file it wrote and did not delete afterwards, and the files
    // whose last change was the agent deleting them.
    const deletesByAgent: Array<{ storeId: string; path: string; sessionId: string }> = [];
    for (const s of sessions) {
      const last = new Map<string, { storeId: string; path: string; content: string | undefined }>();
      for (const r of emu.session(s.sessionId).toolResults) {
        if (r.isError) continue;
        const input = r.input as { file_path?: string; content?: string; command?: string };
        if (r.name === 'write' && input.file_path && input.content?.startsWith(AGENT_TAG)) {
          const at = locate(storeOf, input.file_path);
          if (at) last.set(input.file_path, { ...at, content: input.content });
        } else if (r.name === 'bash' && input.command?.startsWith('rm -f ')) {
          const file = input.command.slice('rm -f '.length).replace(/^'|'$/g, '');
          const at = locate(storeOf, file);
          if (at) last.set(file, { ...at, content: undefined });
        }
      }
      for (const v of last.values()) {
        if (v.content !== undefined) edits.push({ storeId: v.storeId, path: v.path, content: v.content, sessionId: s.sessionId });
        else deletesByAgent.push({ storeId: v.storeId, path: v.path, sessionId: s.sessionId });
      }
    }

    const stores: StoreObservation[] = [...storeOf.values()].map((st) => ({
      storeId: st.storeId,
      current: emu.memories(st.storeId),
      history: emu.memoryHistory(st.storeId).map((w) => ({ op: w.op, path: w.path, content: w.content })),
    }));
    // The journal (one entry per mounted folder) is no copy; an entry left after its folder went is a leftover.
    const journalDir = path.join(stateDir, 'journal');
    const copyFiles = (await allFiles(stateDir)).filter((f) => !f.startsWith(`${journalDir}${path.sep}`));
    const copies = new Set(await Promise.all(copyFiles.map((f) => fsp.readFile(f, 'utf8').catch(() => ''))));
    const leftovers = [
      ...(await fsp.readdir(mountRoot)).map((n) => path.join(mountRoot, n)),
      ...(await fsp.readdir(path.join(workdir, 'sessions')).catch(() => [])).map((n) => path.join(workdir, 'sessions', n)),
      ...(await allFiles(journalDir)).map((f) => `journal entry ${f}`),
    ];
    const unfinished = sessions
      .filter((s) => {
        const snap = emu.session(s.sessionId);
        return snap.status !== 'terminated' || emu.workItems().some((w) => w.sessionId === s.sessionId && w.state !== 'stopped');
      })
      .map((s) => `${s.sessionId} (${emu.session(s.sessionId).scriptProgress})`);
    // Let rejections raised during the shutdown surface before they are counted.
    await new Promise((r) => setTimeout(r, 50));

    const verdict = judgeSoak({
      edits,
      stores,
      agentWrites,
      copies,
      toolRuns,
      toolRunsAcrossItems: new Set([...toolRunOwners].filter(([, o]) => new Set(o).size > 1).map(([id]) => id)),
      workItems: emu.workItems().map((w) => ({ id: w.id, acknowledged: w.acknowledged, state: w.state })),
      unhandledRejections: rejections,
      leftovers,
      unfinished,
    });
    // A delete is honoured when the memory is gone at the end, unless the Console wrote that path
    // (then the store's version rightly comes back).
    let deletesKept = 0;
    let deletesKeptRedelivered = 0;
    for (const d of deletesByAgent) {
      const p = `/${d.path}`;
      const consoleWrote = emu.memoryHistory(d.storeId).some((w) => w.path === p && w.content?.startsWith('console edit'));
      if (!consoleWrote && emu.memories(d.storeId)[p] !== undefined) {
        deletesKept++;
        if (emu.workItems().filter((w) => w.sessionId === d.sessionId).length > 1) deletesKeptRedelivered++;
      }
    }
    const stats = collectStats(
      emu,
      worker,
      sessions.length,
      endedByFailure,
      faults,
      copyFiles.length,
      itemFailures,
      performance.now() - started,
    );
    stats.agentDeletes = deletesByAgent.length;
    stats.agentDeletesNotApplied = deletesKept;
    stats.agentDeletesNotAppliedRedelivered = deletesKeptRedelivered;
    keepBase ||= verdict.violations.length > 0;
    return { verdict, stats, keptAt: keepBase ? base : undefined };
  } finally {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onUncaught);
    await worker?.close().catch(() => undefined);
    await emu.close();
    if (!keepBase) await fsp.rm(base, { recursive: true, force: true });
  }
}

interface SoakSession {
  plan: SessionPlan;
  sessionId: string;
  workId: string;
  stores: StoreInfo[];
}

async function createSessions(emu: Emulator, plans: SessionPlan[], mountRoot: string): Promise<SoakSession[]> {
  const out: SoakSession[] = [];
  for (const plan of plans) {
    const stores: StoreInfo[] = [];
    for (const sp of plan.stores) {
      const store = await emu.createMemoryStore({ name: sp.name, memories: { ...sp.memories } });
      stores.push({ storeId: store.id, root: path.join(mountRoot, slug(sp.name)) });
    }
    const ref = { sessionId: '' };
    const guarded = (f: (emu: Emulator) => unknown) => (e: Emulator) => {
      // A Console edit the store refuses (a path now taken by a folder) is skipped, not a failed session.
      try {
        f(e);
      } catch {
        /* skipped */
      }
    };
    const script: Array<ScriptStep<Emulator>> = plan.steps.map((step): ScriptStep<Emulator> => {
      switch (step.kind) {
        case 'write':
          return { tool: 'write', input: { file_path: `${stores[step.store]!.root}/${step.path}`, content: step.content } };
        case 'delete':
          return { tool: 'bash', input: { command: `rm -f '${stores[step.store]!.root}/${step.path}'` } };
        case 'read':
          return { tool: 'read', input: { file_path: `${stores[step.store]!.root}/${step.path}` } };
        case 'consoleWrite':
          return { console: guarded((e) => e.putMemory(stores[step.store]!.storeId, `/${step.path}`, step.content)) };
        case 'consoleDelete':
          return { console: guarded((e) => e.removeMemory(stores[step.store]!.storeId, `/${step.path}`)) };
        case 'dropStreams':
          return { console: guarded((e) => e.dropStreams(ref.sessionId)) };
        case 'sleep':
          return { sleepMs: step.ms };
      }
    });
    const { sessionId, workId } = await emu.createSession({
      resources: stores.map((st) => ({ memoryStoreId: st.storeId, access: 'read_write' as const })),
      script,
    });
    ref.sessionId = sessionId;
    out.push({ plan, sessionId, workId, stores });
  }
  return out;
}

interface SoakFaults {
  all: FaultHandle[];
  streamDrops: FaultHandle;
  leaseLost: FaultHandle[];
}

/**
 * The injected faults: 5xx and 429 on about 12 % of memory and work requests, about 3 % lost
 * responses (the write happens, the answer never comes), event streams cut after result posts,
 * heartbeats answered 412 (lease lost) and a few requests that hang until the client gives up.
 */
function addFaults(emu: Emulator): SoakFaults {
  const memory = MEMORY_ROUTE;
  const work = WORK_ROUTE;
  const all: FaultHandle[] = [];
  const add = (rule: Parameters<Emulator['faults']['add']>[0]): FaultHandle => {
    const h = emu.faults.add(rule);
    all.push(h);
    return h;
  };
  add({ route: memory, status: 503, rate: 0.09 });
  add({ route: memory, status: 429, rate: 0.05 });
  add({ route: work, status: 503, rate: 0.08 });
  add({ route: work, status: 429, rate: 0.05 });
  add({ route: memory, dropResponse: true, rate: 0.03 });
  add({ route: work, dropResponse: true, rate: 0.03 });
  const streamDrops = add({ route: /^POST \/v1\/sessions\/[^/]+\/events$/, dropStream: true, rate: 0.05 });
  const leaseLost = add({ route: /\/heartbeat$/, leaseLost: true, rate: 0.02 });
  // At least one lease loss and one hung heartbeat in every run, however short.
  const firstLeaseLost = add({ route: /\/heartbeat$/, leaseLost: true, skip: 6, times: 1 });
  add({ route: /\/heartbeat$/, hang: true, rate: 0.01 });
  add({ route: /\/heartbeat$/, hang: true, skip: 3, times: 1 });
  add({ route: /^POST \/v1\/memory_stores\/[^/]+\/memories/, hang: true, rate: 0.01, times: 3 });
  add({ route: /^GET \/v1\/sessions\/[^/]+$/, hang: true, rate: 0.05, times: 2 });
  return { all, streamDrops, leaseLost: [leaseLost, firstLeaseLost] };
}

/**
 * Wait until every session ended: its agent finished and its items are stopped. A session whose
 * item failed and was stopped cannot go on (nobody hands its work out again): it is archived, as an
 * operator would, and counted as ended by failure. Returns that count.
 */
async function waitForSessions(emu: Emulator, sessions: SoakSession[], opts: SoakOptions, failed: Set<string>): Promise<number> {
  const deadline = performance.now() + opts.deadlineMs;
  const archived = new Set<string>();
  let reported = 0;
  let lastReportAt = performance.now();
  for (;;) {
    const items = emu.workItems();
    let open = 0;
    for (const s of sessions) {
      const mine = items.filter((w) => w.sessionId === s.sessionId);
      const allStopped = mine.every((w) => w.state === 'stopped');
      const status = emu.session(s.sessionId).status;
      if (status === 'terminated' && allStopped) continue;
      open++;
      if (status !== 'terminated' && allStopped && failed.has(s.sessionId) && !archived.has(s.sessionId)) {
        archived.add(s.sessionId);
        emu.archiveSession(s.sessionId);
      }
    }
    const done = sessions.length - open;
    const elapsedS = ((performance.now() - deadline + opts.deadlineMs) / 1000).toFixed(0);
    if (opts.progress && done >= reported + Math.max(1, Math.ceil(sessions.length / 10))) {
      reported = done;
      lastReportAt = performance.now();
      opts.progress(`${done}/${sessions.length} sessions ended (${elapsedS} s)`);
    } else if (opts.progress && performance.now() - lastReportAt > 30_000) {
      // Say what the stragglers wait for.
      lastReportAt = performance.now();
      const waiting = sessions
        .filter(
          (s) =>
            emu.session(s.sessionId).status !== 'terminated' || items.some((w) => w.sessionId === s.sessionId && w.state !== 'stopped'),
        )
        .slice(0, 5)
        .map(
          (s) =>
            `${s.sessionId}: ${emu.session(s.sessionId).scriptProgress}; items ${items
              .filter((w) => w.sessionId === s.sessionId)
              .map((w) => w.state)
              .join(',')}`,
        );
      opts.progress(`${done}/${sessions.length} sessions ended (${elapsedS} s); waiting for ${waiting.join(' | ')}`);
    }
    if (open === 0 || performance.now() > deadline) return archived.size;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Wrap a tool so every real run is counted by its tool_use id. */
function countRuns(tool: BetaRunnableTool, runs: Map<string, number>, owners: Map<string, number[]>, itemRun: number): BetaRunnableTool {
  const run = (args: unknown, context?: BetaToolRunContext): ReturnType<BetaRunnableTool['run']> => {
    const id = context?.toolUse?.id;
    if (id !== undefined) {
      runs.set(id, (runs.get(id) ?? 0) + 1);
      owners.set(id, [...(owners.get(id) ?? []), itemRun]);
    }
    return tool.run(args, context);
  };
  return new Proxy(tool, {
    get(target, prop) {
      if (prop === 'run') return run;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

function locate(storeOf: Map<string, StoreInfo>, file: string): { storeId: string; path: string } | undefined {
  for (const [root, st] of storeOf) if (file.startsWith(`${root}/`)) return { storeId: st.storeId, path: file.slice(root.length + 1) };
  return undefined;
}

async function allFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    const entries = await fsp.readdir(d, { withFileTypes: true }).catch(() => []);
    for (const ent of entries) {
      const p = path.join(d, ent.name);
      if (ent.isDirectory()) await walk(p);
      else if (ent.isFile()) out.push(p);
    }
  };
  await walk(dir);
  return out;
}

function collectStats(
  emu: Emulator,
  worker: EnvironmentWorker,
  sessions: number,
  endedByFailure: number,
  faults: SoakFaults,
  copies: number,
  itemFailures: string[],
  durationMs: number,
): SoakStats {
  const requests = emu.requests;
  const memory = requests.filter((r) => MEMORY_ROUTE.test(`${r.method} ${r.path}`));
  const work = requests.filter((r) => WORK_ROUTE.test(`${r.method} ${r.path}`));
  const failedByFault = (rs: typeof requests): number => rs.filter((r) => r.fault === 'status').length;
  const m = worker.metrics();
  let toolCalls = 0;
  let postedTwice = 0;
  const seenSessions = new Set(
    emu
      .workItems()
      .map((w) => w.sessionId)
      .filter((s): s is string => typeof s === 'string'),
  );
  for (const id of seenSessions) {
    const results = emu.session(id).toolResults;
    const ids = results.map((r) => r.toolUseId);
    toolCalls += new Set(ids).size;
    postedTwice += ids.length - new Set(ids).size;
  }
  return {
    durationMs,
    sessionsEndedByAgent: sessions - endedByFailure,
    sessionsEndedByFailure: endedByFailure,
    itemsClaimed: m.itemsClaimed,
    itemsFailed: m.itemsFailed,
    leaseLosses: m.leaseLosses,
    memoryRequests: memory.length,
    memoryFailed: failedByFault(memory),
    workRequests: work.length,
    workFailed: failedByFault(work),
    lostResponses: requests.filter((r) => r.fault === 'dropResponse').length,
    hangs: requests.filter((r) => r.fault === 'hang').length,
    streamDrops: faults.streamDrops.hits,
    leaseLossesInjected: faults.leaseLost.reduce((n, h) => n + h.hits, 0),
    itemFailures,
    agentDeletes: 0,
    agentDeletesNotApplied: 0,
    agentDeletesNotAppliedRedelivered: 0,
    toolCalls,
    resultsPostedTwice: postedTwice,
    uploads: m.uploads,
    conflicts: m.conflicts,
    deletes: m.deletes,
    flushCutOffs: m.flushCutOffs,
    copies,
  };
}
