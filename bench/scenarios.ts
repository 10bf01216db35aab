/**
 * The benchmark scenarios. Each one seeds a fresh emulator, runs one child (official, ours or the
 * floor) until its sessions are done, and returns named measurements taken from the emulator's
 * request log and the child's own resource usage. Sizes shrink in `--quick` mode, which only proves
 * the benchmark runs.
 */
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import type { Emulator, RequestRecord, ScriptStep } from '../src/testing/index.js';
import type { ChildKind } from './build-children.js';
import type { FloorConfig } from './child/protocol.js';
import { endOf, requestsOf, ROUTES, type JobContext } from './job.js';
import { proxyDownload, proxyDownloadGigabit, sandboxStartWithProxy } from './network.js';
import { sandboxMemory } from './sandbox-memory.js';

export type Metrics = Record<string, number>;

export interface Scenario {
  id: string;
  /** Which children run it; the floor only where a mount is compared with bare listings. */
  kinds: ChildKind[];
  /** True when the scenario waits out a sync interval (several seconds whatever its size). */
  waitsForSync?: boolean;
  /** The emulator's latency per answer for this scenario, in ms, whatever `--latency` says. */
  latencyMs?: number;
  /** Runs only when its flag is given (`--caps`): too heavy for the default run. */
  optIn?: 'caps';
  run(ctx: JobContext): Promise<Metrics>;
}

/** Top-level folders per seeded store: memories are spread evenly over them. */
const FOLDERS_PER_STORE = 10;
const SESSION_TIMEOUT_MS = 180_000;
/** Listing pages the floor child has in flight: as many as our mount's default fan-out (twice its concurrency of 16). */
const FLOOR_LISTINGS_IN_FLIGHT = 32;
/** Past the 5 s sync interval both workers are given, so the next tool call syncs. */
const PAST_INTERVAL_MS = 5_300;

interface Size {
  stores: number;
  memories: number;
  bytes: number;
  /** Every store holds the same contents (the emulator keeps one copy of each: the caps row's 1.6 GB would not fit twice). */
  sameContents?: boolean;
}

/** What the scenarios can be asked for on the command line. */
export interface ScenarioOptions {
  /** Sessions the plateau scenario serves (`--sessions`). */
  sessions: number;
}

/** `/topic-<k>/note-<i>.md` spread over {@link FOLDERS_PER_STORE} folders. */
function memoryPath(i: number): string {
  return `/topic-${i % FOLDERS_PER_STORE}/note-${String(i).padStart(5, '0')}.md`;
}

function content(storeIndex: number, i: number, bytes: number): string {
  const head = `memory ${storeIndex}/${i}\n`;
  return head + 'abcdefghijklmnopqrstuvwxyz0123456789 '.repeat(Math.ceil(bytes / 37)).slice(0, Math.max(0, bytes - head.length));
}

/** `/flat/note-<i>.md`: every memory in one folder. */
function flatPath(i: number): string {
  return `/flat/note-${String(i).padStart(5, '0')}.md`;
}

async function seedStores(
  emu: Emulator,
  size: Size,
  prefix: string,
  pathOf: (i: number) => string = memoryPath,
): Promise<Array<{ id: string; dir: string }>> {
  const out: Array<{ id: string; dir: string }> = [];
  for (let s = 0; s < size.stores; s++) {
    const memories: Record<string, string> = {};
    for (let i = 0; i < size.memories; i++) memories[pathOf(i)] = content(size.sameContents === true ? 0 : s, i, size.bytes);
    const store = await emu.createMemoryStore({ name: `${prefix} ${s}`, memories });
    out.push({ id: store.id, dir: `${prefix}-${s}` });
  }
  return out;
}

function readStep(mountRoot: string, storeDir: string, i = 0, pathOf: (i: number) => string = memoryPath): ScriptStep<Emulator> {
  return { tool: 'read', input: { file_path: path.join(mountRoot, storeDir, pathOf(i).slice(1)) } };
}

function toolResults(emu: Emulator, sessionId: string): RequestRecord[] {
  return requestsOf(emu, ROUTES.events, `/v1/sessions/${sessionId}/events`).filter((r) => {
    const events = (r.body as { events?: Array<{ type?: string }> } | undefined)?.events ?? [];
    return r.status === 200 && events.some((e) => e.type === 'user.tool_result' || e.type === 'user.custom_tool_result');
  });
}

function first<T>(items: T[], what: string): T {
  const item = items[0];
  if (item === undefined) throw new Error(`bench: no ${what} in the request log`);
  return item;
}

function last<T>(items: T[], what: string): T {
  const item = items.at(-1);
  if (item === undefined) throw new Error(`bench: no ${what} in the request log`);
  return item;
}

/** Run one session to its end with the child the job asks for; returns the child's CPU delta and peak RSS. */
async function runSessions(
  ctx: JobContext,
  sessionIds: string[],
  opts: { concurrency?: number; floor?: FloorConfig; timeoutMs?: number; sandbox?: 'none'; folder?: string } = {},
): Promise<{
  cpuMs: number;
  peakRssMiB: number;
  peakHeapMiB: number;
  peakExternalMiB: number;
  readyRssMiB: number;
  rssGrowthMiB: number;
  readyAtMs: number[] | undefined;
}> {
  const child = await ctx.startChild(opts);
  const timeoutMs = opts.timeoutMs ?? SESSION_TIMEOUT_MS;
  const done = await Promise.all(sessionIds.map((id) => ctx.emu.waitForSession(id, { timeoutMs }))).then(
    () => undefined,
    (e: unknown) => e,
  );
  const end = await child.stop();
  if (done !== undefined) throw done;
  return {
    cpuMs: end.cpuMs - child.readyUsage.cpuMs,
    peakRssMiB: end.maxRssMiB,
    peakHeapMiB: end.atPeak?.heapTotal ?? NaN,
    peakExternalMiB: end.atPeak?.external ?? NaN,
    // RSS once the modules are loaded and the worker built, and how far the work took it past that.
    readyRssMiB: child.readyUsage.maxRssMiB,
    rssGrowthMiB: end.maxRssMiB - child.readyUsage.maxRssMiB,
    readyAtMs: end.readyAtMs,
  };
}

/** Where a session's mount ended: our child's `sessionStarted`, else (the official) its stream's opening. */
function mountEndOf(readyAtMs: number[] | undefined, streamOpen: number): number {
  return readyAtMs?.[0] ?? streamOpen;
}

/**
 * The plain-write floor of a mount: a bare client pages the same listings and writes each file once
 * with a plain write. Its wall runs from its first listing request to its last file written.
 */
async function plainWriteFloor(ctx: JobContext, storeIds: string[], token: string): Promise<number> {
  const mark = ctx.emu.requests.length;
  const child = await ctx.startChild({
    floor: {
      kind: 'listings',
      storeIds,
      sessionsToken: token,
      concurrency: FLOOR_LISTINGS_IN_FLIGHT,
      writeTo: path.join(ctx.tmp, 'floor-write'),
    },
  });
  const deadline = Date.now() + SESSION_TIMEOUT_MS;
  let doneAt: number | undefined;
  while ((doneAt = (await child.usage()).doneAtMs) === undefined) {
    if (Date.now() > deadline) throw new Error('bench: the plain-write floor child did not finish');
    await new Promise((r) => setTimeout(r, 10));
  }
  await child.stop();
  const lists = ctx.emu.requests.slice(mark).filter((r) => r.route === ROUTES.listMemories);
  return doneAt - Math.min(...lists.map((r) => r.startedAt));
}

/** Claim → first tool result, and first listing → event stream opened, for a one-session mount. */
async function mountScenario(
  ctx: JobContext,
  size: Size,
  prefix: string,
  opts: { timeoutMs?: number; plainWriteFloor?: boolean; sandbox?: 'none'; folder?: string } = {},
): Promise<Metrics> {
  const stores = await seedStores(ctx.emu, size, prefix);
  const storeIds = stores.map((s) => s.id);
  if (ctx.kind === 'floor') {
    const { sessionId } = await ctx.emu.createSession({ resources: storeIds.map((id) => ({ memoryStoreId: id })) });
    const token = ctx.emu.sessionsToken(sessionId);
    if (token === null) throw new Error('bench: the floor session has no sessions token');
    const child = await ctx.startChild({
      floor: { kind: 'listings', storeIds, sessionsToken: token, concurrency: FLOOR_LISTINGS_IN_FLIGHT },
    });
    const expected = size.stores * (1 + FOLDERS_PER_STORE * Math.ceil(size.memories / FOLDERS_PER_STORE / 20));
    const deadline = Date.now() + SESSION_TIMEOUT_MS;
    while (requestsOf(ctx.emu, ROUTES.listMemories).length < expected) {
      if (Date.now() > deadline) throw new Error('bench: the floor child did not finish its listings');
      await new Promise((r) => setTimeout(r, 10));
    }
    await child.stop();
    const lists = requestsOf(ctx.emu, ROUTES.listMemories);
    const floorMs = Math.max(...lists.map(endOf)) - first(lists, 'listing').startedAt;
    if (opts.plainWriteFloor !== true) return { floorMs };
    return { floorMs, floorWriteMs: await plainWriteFloor(ctx, storeIds, token) };
  }
  const { sessionId, workId } = await ctx.emu.createSession({
    resources: storeIds.map((id) => ({ memoryStoreId: id })),
    script: [readStep(ctx.mountRoot, stores[0]!.dir)],
  });
  const { readyAtMs, ...usage } = await runSessions(ctx, [sessionId], {
    ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
    ...(opts.sandbox !== undefined ? { sandbox: opts.sandbox } : {}),
    ...(opts.folder !== undefined ? { folder: opts.folder } : {}),
  });
  const claim = first(requestsOf(ctx.emu, ROUTES.ack, workId), 'ack').startedAt;
  const firstTool = first(toolResults(ctx.emu, sessionId), 'tool result').startedAt;
  // This session's listings: those of its stores (a job may run several sessions one after another).
  const firstList = first(
    requestsOf(ctx.emu, ROUTES.listMemories).filter((r) => storeIds.some((id) => r.path.includes(id))),
    'listing',
  ).startedAt;
  const streamOpen = first(requestsOf(ctx.emu, ROUTES.stream, sessionId), 'stream open').startedAt;
  return { claimToFirstToolMs: firstTool - claim, mountWallMs: mountEndOf(readyAtMs, streamOpen) - firstList, ...usage };
}

/** Which of the two runs of `mount-8x250-50ms` goes first in ours' next job: alternated. */
let mountSandboxTurn = 0;

/**
 * Ours, the same mount twice in one job, each with a child and folders of its own (so neither finds
 * the other's content cache), in alternating order: with the sandbox the worker chooses by default
 * (bubblewrap where it starts) and with `sandbox: 'none'`. The official worker runs it once.
 */
async function mountSandboxedAndNone(ctx: JobContext, size: Size, prefix: string): Promise<Metrics> {
  if (!ctx.runsOurs) return mountScenario(ctx, size, prefix);
  const order = mountSandboxTurn++ % 2 === 0 ? (['default', 'none'] as const) : (['none', 'default'] as const);
  const out: Metrics = {};
  for (const mode of order) {
    if (mode === 'default') Object.assign(out, await mountScenario(ctx, size, `${prefix}-sandboxed`, { folder: 'sandboxed' }));
    else {
      const none = await mountScenario(ctx, size, `${prefix}-none`, { sandbox: 'none', folder: 'none' });
      Object.assign(out, { claimToFirstToolNoneMs: none.claimToFirstToolMs!, mountWallNoneMs: none.mountWallMs! });
    }
  }
  return out;
}

/** Requests that carry memory contents (full-view listing pages and retrieves) in `reqs`. */
function contentRequests(reqs: RequestRecord[]): number {
  return reqs.filter((r) => (r.route === ROUTES.listMemories && r.query['view'] === 'full') || r.route === ROUTES.retrieveMemory).length;
}

/**
 * Two sessions of one unchanged store, one after the other, served by the same worker process:
 * claim → first tool call of each, and the content requests the second one made.
 */
async function warmScenario(
  ctx: JobContext,
  size: Size,
  prefix: string,
  pathOf: (i: number) => string,
  access: 'read_write' | 'read_only' = 'read_write',
): Promise<Metrics> {
  const [store] = await seedStores(ctx.emu, size, prefix, pathOf);
  const child = await ctx.startChild();
  const run = async (): Promise<{ claimToFirstToolMs: number; contentRequests: number }> => {
    const { sessionId, workId } = await ctx.emu.createSession({
      resources: [{ memoryStoreId: store!.id, access }],
      script: [readStep(ctx.mountRoot, store!.dir, 0, pathOf)],
    });
    await ctx.emu.waitForSession(sessionId, { timeoutMs: SESSION_TIMEOUT_MS });
    // The item is over once it is stopped: the next session's mount path is free again.
    const deadline = Date.now() + SESSION_TIMEOUT_MS;
    while (requestsOf(ctx.emu, ROUTES.stop, workId).length === 0) {
      if (Date.now() > deadline) throw new Error('bench warm: the first work item was never stopped');
      await new Promise((r) => setTimeout(r, 10));
    }
    const claim = first(requestsOf(ctx.emu, ROUTES.ack, workId), 'ack').startedAt;
    const firstTool = first(toolResults(ctx.emu, sessionId), 'tool result').startedAt;
    const stopped = Math.max(...requestsOf(ctx.emu, ROUTES.stop, workId).map(endOf));
    const during = ctx.emu.requests.filter((r) => r.startedAt >= claim && r.startedAt <= stopped && r.path.includes(store!.id));
    return { claimToFirstToolMs: firstTool - claim, contentRequests: contentRequests(during) };
  };
  try {
    const cold = await run();
    const warm = await run();
    return {
      coldClaimToFirstToolMs: cold.claimToFirstToolMs,
      claimToFirstToolMs: warm.claimToFirstToolMs,
      contentRequests: warm.contentRequests,
      coldContentRequests: cold.contentRequests,
    };
  } finally {
    await child.stop();
  }
}

/** Claim → first tool call for one store of memories all in one folder; the floor pages it on one cursor. */
async function flatColdScenario(ctx: JobContext, size: Size): Promise<Metrics> {
  const stores = await seedStores(ctx.emu, size, 'flat', flatPath);
  const store = stores[0]!;
  if (ctx.kind === 'floor') {
    const { sessionId } = await ctx.emu.createSession({ resources: [{ memoryStoreId: store.id }] });
    const token = ctx.emu.sessionsToken(sessionId);
    if (token === null) throw new Error('bench: the floor session has no sessions token');
    const child = await ctx.startChild({
      floor: { kind: 'listings', storeIds: [store.id], sessionsToken: token, concurrency: 16, oneCursor: true },
    });
    const expected = Math.ceil(size.memories / 20);
    const deadline = Date.now() + SESSION_TIMEOUT_MS;
    while (requestsOf(ctx.emu, ROUTES.listMemories).length < expected) {
      if (Date.now() > deadline) throw new Error('bench: the floor child did not finish its listing');
      await new Promise((r) => setTimeout(r, 10));
    }
    await child.stop();
    const lists = requestsOf(ctx.emu, ROUTES.listMemories);
    return { floorMs: Math.max(...lists.map(endOf)) - first(lists, 'listing').startedAt, floorRequests: lists.length };
  }
  const { sessionId, workId } = await ctx.emu.createSession({
    resources: [{ memoryStoreId: store.id }],
    script: [readStep(ctx.mountRoot, store.dir, 0, flatPath)],
  });
  const { readyAtMs } = await runSessions(ctx, [sessionId]);
  const claim = first(requestsOf(ctx.emu, ROUTES.ack, workId), 'ack').startedAt;
  const firstTool = first(toolResults(ctx.emu, sessionId), 'tool result').startedAt;
  const lists = requestsOf(ctx.emu, ROUTES.listMemories).filter((r) => r.startedAt < firstTool);
  const streamOpen = first(requestsOf(ctx.emu, ROUTES.stream, sessionId), 'stream open').startedAt;
  return {
    claimToFirstToolMs: firstTool - claim,
    mountWallMs: mountEndOf(readyAtMs, streamOpen) - first(lists, 'listing').startedAt,
    listRequests: lists.length,
  };
}

/**
 * The agent writes `count` new files of `bytes` bytes into the store's folder, in 10 folders, with
 * one bash call: the files appear where the session's tools see the store (with our sandbox, the
 * session's own copy bound at `dir`; with the official worker, `dir` on the host), as an agent's
 * would.
 */
function writeFilesStep(dir: string, count: number, bytes: number): ScriptStep<Emulator> {
  const pad = Math.max(0, bytes - 12);
  const command =
    `cd ${JSON.stringify(dir)} && pad=$(head -c ${pad} /dev/zero | tr '\\0' x) && ` +
    `for i in $(seq 0 ${count - 1}); do d=new-$((i % 10)); mkdir -p $d; ` +
    `printf 'file %05d %s' $i "$pad" > $d/file-$(printf %04d $i).md; done`;
  return { tool: 'bash', input: { command } };
}

/** Which of the sandbox scenario's two runs goes first: alternates from one repetition to the next. */
let sandboxTurn = 0;
/** Which of the limits scenario's two runs goes first: alternates from one repetition to the next. */
let limitsTurn = 0;

/**
 * The memory of the processes a worker child started (its sandboxes, their inits, tool hosts and
 * shells), divided by the number of sandboxes running: what one sandboxed session adds. PSS splits
 * each shared page among its users; RSS counts it in full in each.
 */
async function sandboxesMemory(workerPid: number): Promise<{ pssMiB: number; rssMiB: number; sandboxes: number }> {
  const m = await sandboxMemory(workerPid);
  if (m.sandboxes === 0) return { pssMiB: NaN, rssMiB: NaN, sandboxes: 0 };
  return { pssMiB: m.pssKiB / 1024 / m.sandboxes, rssMiB: m.rssKiB / 1024 / m.sandboxes, sandboxes: m.sandboxes };
}

async function pssPerSandboxMiB(workerPid: number): Promise<number> {
  return (await sandboxesMemory(workerPid)).pssMiB;
}

/** A process's resident set (MiB), from /proc. */
async function rssOfMiB(pid: number): Promise<number> {
  const status = await fsp.readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN) / 1024;
}

/** How long the sessions sit idle, all started and each past its first calls, before their memory is read. */
const IDLE_SETTLE_MS = 2_000;

/**
 * `sessions` sessions at once in one worker (`concurrency` = `sessions`), each with a small store of
 * its own, each making a `bash` and a `read` call and then waiting, idle, until all of them have; after
 * {@link IDLE_SETTLE_MS} the sandboxes' processes are measured (PSS and RSS per session) with the
 * worker's RSS. Then the same sessions run again with `sandbox: 'none'` in a child of their own (the
 * worker's RSS when the tools run in its process).
 */
async function idleSessionsScenario(ctx: JobContext, sessions: number): Promise<Metrics> {
  const out: Metrics = {};
  // The official worker runs tools in its own process: no figures; its column is ours as of --base only.
  if (!ctx.runsOurs) return out;
  for (const mode of ['default', 'none'] as const) {
    const stores = await seedStores(ctx.emu, { stores: sessions, memories: 5, bytes: 1024 }, `idle-${mode}`);
    let arrived = 0;
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    let childPid = -1;
    let measured: Promise<void> | undefined;
    const measure = async (): Promise<void> => {
      await new Promise((r) => setTimeout(r, IDLE_SETTLE_MS));
      const workerRssMiB = await rssOfMiB(childPid);
      if (mode === 'none') out['workerRssNoneMiB'] = workerRssMiB;
      else {
        const m = await sandboxesMemory(childPid);
        if (m.sandboxes !== sessions) throw new Error(`bench idle (${sessions}): ${m.sandboxes} sandboxes running, expected ${sessions}`);
        Object.assign(out, { pssPerSessionMiB: m.pssMiB, rssPerSessionMiB: m.rssMiB, workerRssMiB });
      }
    };
    const ids: string[] = [];
    for (const [i, store] of stores.entries()) {
      const script: ScriptStep<Emulator>[] = [
        { tool: 'bash', input: { command: 'true' } },
        readStep(ctx.mountRoot, store.dir, i % 5),
        {
          console: async () => {
            if (++arrived === sessions) measured = measure().finally(release);
            await released;
          },
        },
      ];
      ids.push((await ctx.emu.createSession({ resources: [{ memoryStoreId: store.id }], script })).sessionId);
    }
    const child = await ctx.startChild({ concurrency: sessions, folder: mode, ...(mode === 'none' ? { sandbox: 'none' as const } : {}) });
    childPid = child.pid;
    const done = await Promise.all(ids.map((id) => ctx.emu.waitForSession(id, { timeoutMs: SESSION_TIMEOUT_MS }))).then(
      () => undefined,
      (e: unknown) => e,
    );
    await child.stop();
    if (done !== undefined) throw done;
    await measured;
  }
  return out;
}

/**
 * Many sessions served one after another by one process: RSS after the first 50, and after all of
 * them, each measured after a full garbage collection. A daemon that plateaus grows little between.
 */
async function plateauScenario(ctx: JobContext, total: number, calls: number): Promise<Metrics> {
  // 64 KiB of output per call, made by bash itself: it needs no file, so it runs the same in a sandbox.
  const line = '0123456789abcdef'.repeat(4).slice(0, 63);
  const script = Array.from({ length: calls }, (): ScriptStep<Emulator> => ({
    tool: 'bash',
    input: { command: `yes ${line} | head -c 65536` },
  }));
  const batch = async (n: number): Promise<void> => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push((await ctx.emu.createSession({ script })).sessionId);
    await Promise.all(ids.map((id) => ctx.emu.waitForSession(id, { timeoutMs: SESSION_TIMEOUT_MS * 4 })));
  };
  // RSS is read after the first 50 sessions (half of them in the quick smoke run) and after the last.
  const first = total > 50 ? 50 : Math.floor(total / 2);
  const child = await ctx.startChild({ concurrency: ctx.runsOurs ? 8 : 1, execArgv: ['--expose-gc'] });
  let at50: number;
  let atEnd: number;
  try {
    await batch(first);
    at50 = (await child.usage({ gc: true })).rssMiB ?? NaN;
    await batch(total - first);
    atEnd = (await child.usage({ gc: true })).rssMiB ?? NaN;
  } finally {
    await child.stop();
  }
  return { rssAt50MiB: at50, rssAtEndMiB: atEnd, rssGrowthMiB: atEnd - at50 };
}

/** Which of the two halves of `shared-store-8` runs first in the next job: alternated, as the sandbox row does. */
let sharedTurn = 0;

/**
 * Eight sessions at once, each attaching one read-only store of 300 memories plus a small store of
 * its own, each making six tool calls of 0.3 s (a read of the big store, then a sleep); ours at
 * `concurrency: 8`, the official worker one session at a time. Run twice in one job, in alternating
 * order: with all eight attaching the same big store (`wallSharedMs`), and with a big store each
 * (`wallDistinctMs`, the parallel floor: nothing shared, nothing to wait for).
 */
async function sharedStoreScenario(ctx: JobContext, quick: boolean): Promise<Metrics> {
  const sessions = quick ? 3 : 8;
  const calls = quick ? 2 : 6;
  const out: Metrics = {};
  const halves = sharedTurn++ % 2 === 0 ? (['shared', 'distinct'] as const) : (['distinct', 'shared'] as const);
  for (const half of halves) {
    const distinct = half === 'distinct';
    const bigSize = { stores: distinct ? sessions : 1, memories: quick ? 30 : 300, bytes: 1024 };
    const big = await seedStores(ctx.emu, bigSize, `${half}-handbook`);
    const own = await seedStores(ctx.emu, { stores: sessions, memories: 5, bytes: 512 }, `${half}-own`);
    const ids: string[] = [];
    const workIds: string[] = [];
    for (let i = 0; i < sessions; i++) {
      const handbook = big[distinct ? i : 0]!;
      const script = Array.from({ length: calls }, (_, k): ScriptStep<Emulator> => ({
        tool: 'bash',
        input: { command: `cat ${path.join(ctx.mountRoot, handbook.dir, memoryPath(k).slice(1))} > /dev/null && sleep 0.3` },
      }));
      const s = await ctx.emu.createSession({
        resources: [{ memoryStoreId: handbook.id, access: 'read_only' }, { memoryStoreId: own[i]!.id }],
        script,
      });
      ids.push(s.sessionId);
      workIds.push(s.workId);
    }
    const { cpuMs } = await runSessions(ctx, ids, { concurrency: ctx.runsOurs ? sessions : 1 });
    const acks = workIds.flatMap((w) => requestsOf(ctx.emu, ROUTES.ack, w)).sort((a, b) => a.startedAt - b.startedAt);
    const stops = workIds.flatMap((w) => requestsOf(ctx.emu, ROUTES.stop, w));
    if (stops.length < sessions) throw new Error(`bench shared-store-8 (${half}): ${stops.length} of ${sessions} work items stopped`);
    const wallMs = Math.max(...stops.map(endOf)) - first(acks, 'ack').startedAt;
    if (distinct) Object.assign(out, { wallDistinctMs: wallMs, cpuDistinctMs: cpuMs });
    else Object.assign(out, { wallSharedMs: wallMs, cpuSharedMs: cpuMs });
  }
  return out;
}

export function scenarios(quick: boolean, opts: ScenarioOptions = { sessions: 500 }): Scenario[] {
  const q = <T>(full: T, small: T): T => (quick ? small : full);
  return [
    {
      id: 'mount-8x250',
      kinds: ['official', 'ours', 'floor'],
      run: (ctx) =>
        mountScenario(ctx, q({ stores: 8, memories: 250, bytes: 1024 }, { stores: 2, memories: 40, bytes: 1024 }), 'eight', {
          plainWriteFloor: true,
        }),
    },
    {
      id: 'mount-8x250-50ms',
      kinds: ['official', 'ours', 'floor'],
      latencyMs: 50,
      run: (ctx) =>
        mountSandboxedAndNone(ctx, q({ stores: 8, memories: 250, bytes: 1024 }, { stores: 2, memories: 40, bytes: 1024 }), 'slow'),
    },
    {
      id: 'mount-1x2000',
      kinds: ['official', 'ours', 'floor'],
      run: (ctx) =>
        mountScenario(ctx, q({ stores: 1, memories: 2000, bytes: 1024 }, { stores: 1, memories: 200, bytes: 1024 }), 'single', {
          plainWriteFloor: true,
        }),
    },
    {
      id: 'mount-2x2000x64k',
      kinds: ['official', 'ours'],
      run: (ctx) =>
        mountScenario(ctx, q({ stores: 2, memories: 2000, bytes: 64 * 1024 }, { stores: 2, memories: 40, bytes: 64 * 1024 }), 'heavy'),
    },
    {
      id: 'mount-caps',
      kinds: ['official', 'ours'],
      optIn: 'caps',
      run: (ctx) =>
        mountScenario(
          ctx,
          q({ stores: 8, memories: 2000, bytes: 100 * 1024, sameContents: true }, { stores: 2, memories: 40, bytes: 100 * 1024 }),
          'caps',
          {
            timeoutMs: 900_000,
          },
        ),
    },
    {
      id: 'sessions-plateau',
      kinds: ['official', 'ours'],
      run: (ctx) => plateauScenario(ctx, q(opts.sessions, 12), 5),
    },
    {
      id: 'mount-8x1000x8k',
      kinds: ['official', 'ours'],
      run: (ctx) => mountScenario(ctx, q({ stores: 8, memories: 1000, bytes: 8192 }, { stores: 2, memories: 40, bytes: 8192 }), 'large'),
    },
    {
      id: 'warm-2000x10',
      kinds: ['official', 'ours'],
      ...(quick ? {} : { latencyMs: 50 }),
      run: (ctx) =>
        warmScenario(ctx, q({ stores: 1, memories: 2000, bytes: 1024 }, { stores: 1, memories: 200, bytes: 1024 }), 'warm', memoryPath),
    },
    {
      // The same with the store attached read-only: a sandboxed session's copy links the cached files.
      id: 'warm-2000x10-ro',
      kinds: ['official', 'ours'],
      ...(quick ? {} : { latencyMs: 50 }),
      run: (ctx) =>
        warmScenario(
          ctx,
          q({ stores: 1, memories: 2000, bytes: 1024 }, { stores: 1, memories: 200, bytes: 1024 }),
          'warmro',
          memoryPath,
          'read_only',
        ),
    },
    {
      id: 'warm-flat-2000',
      kinds: ['official', 'ours'],
      ...(quick ? {} : { latencyMs: 50 }),
      run: (ctx) =>
        warmScenario(ctx, q({ stores: 1, memories: 2000, bytes: 1024 }, { stores: 1, memories: 200, bytes: 1024 }), 'warmflat', flatPath),
    },
    {
      id: 'mount-flat-2000',
      kinds: ['official', 'ours', 'floor'],
      ...(quick ? {} : { latencyMs: 50 }),
      run: (ctx) => flatColdScenario(ctx, q({ stores: 1, memories: 2000, bytes: 1024 }, { stores: 1, memories: 200, bytes: 1024 })),
    },
    {
      id: 'sync-200',
      kinds: ['official', 'ours'],
      waitsForSync: true,
      async run(ctx) {
        const count = q(200, 20);
        const [store] = await seedStores(ctx.emu, { stores: 1, memories: 10, bytes: 1024 }, 'upload');
        const dir = path.join(ctx.mountRoot, store!.dir);
        const { sessionId } = await ctx.emu.createSession({
          resources: [{ memoryStoreId: store!.id }],
          script: [
            readStep(ctx.mountRoot, store!.dir),
            writeFilesStep(dir, count, 1024),
            { sleepMs: PAST_INTERVAL_MS },
            readStep(ctx.mountRoot, store!.dir),
          ],
        });
        const { cpuMs } = await runSessions(ctx, [sessionId]);
        const creates = requestsOf(ctx.emu, ROUTES.createMemory).filter((r) => r.status === 200);
        if (creates.length !== count) throw new Error(`bench sync-200: expected ${count} creates, saw ${creates.length}`);
        return { firstToLastWriteMs: Math.max(...creates.map(endOf)) - first(creates, 'create').startedAt, cpuMs };
      },
    },
    {
      id: 'final-500',
      kinds: ['official', 'ours'],
      async run(ctx) {
        const count = q(500, 30);
        const [store] = await seedStores(ctx.emu, { stores: 1, memories: 10, bytes: 1024 }, 'final');
        const dir = path.join(ctx.mountRoot, store!.dir);
        const { sessionId, workId } = await ctx.emu.createSession({
          resources: [{ memoryStoreId: store!.id }],
          // A tool call first: the script starts when the worker opens the session's stream, which
          // ours does while the store still mounts; the first call runs once it is mounted.
          script: [readStep(ctx.mountRoot, store!.dir), writeFilesStep(dir, count, 1024), readStep(ctx.mountRoot, store!.dir)],
        });
        const { cpuMs } = await runSessions(ctx, [sessionId]);
        const creates = requestsOf(ctx.emu, ROUTES.createMemory).filter((r) => r.status === 200);
        if (creates.length !== count) throw new Error(`bench final-500: expected ${count} creates, saw ${creates.length}`);
        const lastResult = last(toolResults(ctx.emu, sessionId), 'tool result').startedAt;
        const stopped = Math.max(...requestsOf(ctx.emu, ROUTES.stop, workId).map(endOf));
        return { lastResultToStoppedMs: stopped - lastResult, cpuMs };
      },
    },
    {
      id: 'queue-16x10',
      kinds: ['official', 'ours', 'floor'],
      async run(ctx) {
        const sessions = q(16, 4);
        const calls = q(10, 3);
        const stores = await seedStores(ctx.emu, { stores: sessions, memories: 5, bytes: 1024 }, 'queue');
        const ids: string[] = [];
        for (const store of stores) {
          const script = Array.from({ length: calls }, (_, i) => readStep(ctx.mountRoot, store.dir, i % 5));
          ids.push((await ctx.emu.createSession({ resources: [{ memoryStoreId: store.id }], script })).sessionId);
        }
        // Ours and the floor serve all sessions at once; the official worker serves one at a time.
        const { cpuMs } = await runSessions(
          ctx,
          ids,
          ctx.kind === 'floor' ? { floor: { kind: 'sessions', concurrency: 16 } } : { concurrency: ctx.runsOurs ? 16 : 1 },
        );
        const acks = requestsOf(ctx.emu, ROUTES.ack);
        const stops = requestsOf(ctx.emu, ROUTES.stop);
        if (stops.length < sessions) throw new Error(`bench queue: ${stops.length} of ${sessions} work items stopped`);
        return { wallMs: Math.max(...stops.map(endOf)) - first(acks, 'ack').startedAt, cpuMs };
      },
    },
    {
      // 8 sessions attaching one shared read-only store of 300 memories plus one of their own, and
      // the same with eight distinct stores, in one job.
      id: 'shared-store-8',
      kinds: ['official', 'ours'],
      run: (ctx) => sharedStoreScenario(ctx, quick),
    },
    {
      // Ours alone, with the sandbox off and on in the same job (alternating which goes first):
      // what one sandbox per session costs in wall time, in CPU (tool hosts included) and in memory.
      id: 'queue-16x10-sandbox',
      kinds: ['ours'],
      async run(ctx) {
        const sessions = q(16, 4);
        const calls = q(10, 3);
        const modes = sandboxTurn++ % 2 === 0 ? (['none', 'bwrap'] as const) : (['bwrap', 'none'] as const);
        const out: Metrics = {};
        for (const mode of modes) {
          const stores = await seedStores(ctx.emu, { stores: sessions, memories: 5, bytes: 1024 }, `sandbox-${mode}`);
          let childPid = -1;
          let pssMiB = NaN;
          const workIds: string[] = [];
          const ids: string[] = [];
          for (const [i, store] of stores.entries()) {
            const script: ScriptStep<Emulator>[] = Array.from({ length: calls }, (_, k) => readStep(ctx.mountRoot, store.dir, k % 5));
            // Halfway through the first session, with the others running too: the sandboxes' memory.
            if (i === 0 && mode === 'bwrap')
              script.splice(Math.floor(calls / 2), 0, { console: async () => void (pssMiB = await pssPerSandboxMiB(childPid)) });
            const s = await ctx.emu.createSession({ resources: [{ memoryStoreId: store.id }], script });
            ids.push(s.sessionId);
            workIds.push(s.workId);
          }
          const child = await ctx.startChild({ concurrency: 16, sandbox: mode });
          childPid = child.pid;
          const done = await Promise.all(ids.map((id) => ctx.emu.waitForSession(id, { timeoutMs: SESSION_TIMEOUT_MS }))).then(
            () => undefined,
            (e: unknown) => e,
          );
          const end = await child.stop();
          if (done !== undefined) throw done;
          const acks = workIds.flatMap((w) => requestsOf(ctx.emu, ROUTES.ack, w)).sort((a, b) => a.startedAt - b.startedAt);
          const stops = workIds.flatMap((w) => requestsOf(ctx.emu, ROUTES.stop, w));
          if (stops.length < sessions) throw new Error(`bench sandbox (${mode}): ${stops.length} of ${sessions} work items stopped`);
          const wallMs = Math.max(...stops.map(endOf)) - first(acks, 'ack').startedAt;
          const cpuMs = end.cpuMs - child.readyUsage.cpuMs;
          if (mode === 'none') Object.assign(out, { wallOffMs: wallMs, cpuOffMs: cpuMs, rssOffMiB: end.maxRssMiB });
          else Object.assign(out, { wallOnMs: wallMs, cpuOnMs: cpuMs, pssPerSandboxMiB: pssMiB });
        }
        return out;
      },
    },
    {
      // Ours alone, sandboxed, with the default limits and with limits: null: what the per-session
      // cgroup, the sized tmpfs and the wrapper's rlimits add to a sandbox's start. Two children,
      // one per mode, each serving an environment of its own, are alive together; their sessions
      // run one at a time, alternating between the modes (A B B A A B ...: each mode follows each
      // mode equally often), and each starts once the previous one's work item is stopped (its
      // sandbox and cgroup torn down). So drift and background load hit both modes alike. Each
      // session's first call waits for its sandbox's tool host to be ready, so its round trip is the
      // start; each child's first session (loading the code, the first spawn) is left out.
      id: 'sandbox-start-limits',
      kinds: ['ours'],
      async run(ctx) {
        const sessions = q(24, 3);
        const modes = limitsTurn++ % 2 === 0 ? (['limits', 'unlimited'] as const) : (['unlimited', 'limits'] as const);
        type Mode = (typeof modes)[number];
        const envs = {
          limits: ctx.emu.createEnvironment({ name: 'bench limits' }),
          unlimited: ctx.emu.createEnvironment({ name: 'bench limits: null' }),
        };
        const children: Array<{ stop(): Promise<unknown> }> = [];
        const firstCallMs: Record<Mode, number[]> = { limits: [], unlimited: [] };
        const stores = await seedStores(ctx.emu, { stores: 2 * (sessions + 1), memories: 1, bytes: 64 }, 'limits');
        let failure: unknown;
        try {
          for (const mode of modes) {
            children.push(
              await ctx.startChild({
                concurrency: 1,
                environment: envs[mode],
                folder: mode,
                sandbox: mode === 'limits' ? { mode: 'bwrap' } : { mode: 'bwrap', limits: null },
              }),
            );
          }
          for (let i = 0; i <= sessions; i++) {
            for (const mode of i % 2 === 0 ? modes : [...modes].reverse()) {
              let t0 = 0;
              const script: ScriptStep<Emulator>[] = [
                { console: () => void (t0 = performance.now()) },
                { tool: 'bash', input: { command: 'true' } },
                { console: () => void (i > 0 && firstCallMs[mode].push(performance.now() - t0)) },
              ];
              const store = stores.pop()!;
              const s = await ctx.emu.createSession({ environmentId: envs[mode].id, resources: [{ memoryStoreId: store.id }], script });
              // Resolves once the work item is stopped: after the worker closed the session's sandbox.
              await ctx.emu.waitForSession(s.sessionId, { timeoutMs: SESSION_TIMEOUT_MS });
            }
          }
        } catch (e) {
          failure = e;
        } finally {
          await Promise.all(children.map((c) => c.stop()));
        }
        if (failure !== undefined) throw failure;
        const out: Metrics = {};
        for (const mode of modes) {
          const times = firstCallMs[mode];
          if (times.length < sessions) throw new Error(`bench sandbox-start-limits (${mode}): ${times.length} of ${sessions} first calls`);
          const median = [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)]!;
          Object.assign(out, mode === 'limits' ? { firstCallLimitsMs: median } : { firstCallUnlimitedMs: median });
        }
        return out;
      },
    },
    {
      id: 'idle-sync-2000',
      kinds: ['official', 'ours'],
      waitsForSync: true,
      async run(ctx) {
        // Tool calls spaced past the sync interval; the syncs that ran between the two marks are
        // counted from the log (each one starts with a first-page listing), whatever their timing.
        const spaced = q(3, 1);
        const [store] = await seedStores(ctx.emu, { stores: 1, memories: q(2000, 200), bytes: 1024 }, 'idle');
        const child = await ctx.startChild();
        const marks: number[] = [];
        const cpu: number[] = [];
        const mark: ScriptStep<Emulator> = {
          console: async () => {
            marks.push(Date.now());
            cpu.push((await child.usage()).cpuMs);
          },
        };
        const script: ScriptStep<Emulator>[] = [readStep(ctx.mountRoot, store!.dir), mark];
        for (let i = 0; i < spaced; i++) script.push({ sleepMs: PAST_INTERVAL_MS }, readStep(ctx.mountRoot, store!.dir, i + 1));
        script.push({ sleepMs: 2_000 }, mark);
        const { sessionId } = await ctx.emu.createSession({ resources: [{ memoryStoreId: store!.id }], script });
        try {
          await ctx.emu.waitForSession(sessionId, { timeoutMs: SESSION_TIMEOUT_MS });
        } finally {
          await child.stop();
        }
        const [from, to] = marks as [number, number];
        const memoryRequests = ctx.emu.requests.filter(
          (r) => r.path.startsWith('/v1/memory_stores/') && r.startedAt >= from && r.startedAt <= to,
        );
        const syncs = memoryRequests.filter((r) => r.route === ROUTES.listMemories && r.query['page'] === undefined).length;
        // No sync between the marks leaves the row without a figure (n/a) rather than a made-up one.
        return {
          syncs,
          requestsPerSync: syncs > 0 ? memoryRequests.length / syncs : NaN,
          cpuMsPerSync: syncs > 0 ? (cpu[1]! - cpu[0]!) / syncs : NaN,
        };
      },
    },
    {
      // Ours alone: eight sessions idle at once, each in its sandbox (its tool host waiting), then
      // the same sessions with sandbox: 'none' (the worker's RSS when the tools run in its process).
      id: 'idle-sessions-8',
      kinds: ['ours', 'official'],
      run: (ctx) => idleSessionsScenario(ctx, q(8, 2)),
    },
    {
      // Ours alone: the same with 32 sessions.
      id: 'idle-sessions-32',
      kinds: ['ours', 'official'],
      run: (ctx) => idleSessionsScenario(ctx, q(32, 3)),
    },
    // Ours alone: the sandbox's network through its egress proxy against the host's network.
    { id: 'sandbox-start-proxy', kinds: ['ours'], run: sandboxStartWithProxy },
    { id: 'proxy-download-100m', kinds: ['ours'], run: proxyDownload },
    { id: 'proxy-download-100m-1gbit', kinds: ['ours'], run: proxyDownloadGigabit },
  ];
}
