/**
 * SIGKILL crash test: worker processes are killed at seeded random points — during the download,
 * after an edit not yet synced, during a sync's uploads, during the final sync, during unmount — and
 * restarted on the same state folder. After the restart and the item's redelivery, and then a new
 * session of the same store, every edit that was on disk at the kill is in the store (or was, before
 * a later write replaced it) or kept as a copy in the state folder, the mount path is free (the new
 * session mounts it and it is gone afterwards) and no memory is duplicated. Prints the tally. Each
 * session's tools run sandboxed, so its store is a copy of its own under the state folder: a copy
 * whose session does not come back (killed in its final sync) is left to `recover`, run here as
 * an operator would.
 *
 * CRASH_SEED and CRASH_KILLS override the seed (default 7) and the number of kills (default 30);
 * CRASH_PHASES=download,edit keeps only those phases; CRASH_VERBOSE=1 prints each kill's timings.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator, type FaultHandle, type ScriptStep } from '../../src/testing/index.js';
import pino from 'pino';
import { recoverLeftovers } from '../../src/memory/mount/recovery.js';
import { placeStores, SESSION_STORES_FOLDER, sessionStoresFolder } from '../../src/worker/store-placement.js';
import { allContents, CRASH_TAG, planKills, taggedFiles, WorkerChild, type KillPoint, type Phase } from './crash-harness.js';

const SEED = Number(process.env['CRASH_SEED'] ?? 7);
const KILLS = Number(process.env['CRASH_KILLS'] ?? 30);
/** CRASH_PHASES=download,unmount: only these phases (to reproduce one kind of kill). */
const ONLY = process.env['CRASH_PHASES']?.split(',').filter(Boolean);
const LANES = 6;

interface Lane {
  index: number;
  env: { id: string; key: string };
  mnt: string;
  stateDir: string;
  workdir: string;
  child: WorkerChild | undefined;
}

interface CaseResult {
  kill: KillPoint;
  /** What stopped the case before its checks, if anything. */
  harnessError?: string;
  folderAtKill: boolean;
  /** For a kill around unmount: how far the removal had got. */
  unmountState?: 'intact' | 'partly removed' | 'gone';
  editsAtKill: number;
  toStore: number;
  replacedOnStore: number;
  asCopy: number;
  /** Copies of the session's store that `recover` reconciled (its session did not come back). */
  recovered?: number;
  lost: string[];
  /** Why the redelivered item or the new session could not use the path, if it could not. */
  blocked?: string;
  pathLeft: boolean;
  /** Journal entries still naming the path after the new session ended. */
  journalLeft: number;
  duplicates: string[];
  /** Seconds from the case's start to the kill, to the first session's end, to the new session's end. */
  timings: string;
}

let emu: Emulator;
let base: string;
const lanes: Lane[] = [];
const results: CaseResult[] = [];

beforeAll(async () => {
  base = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-crash-'));
  emu = await startEmulator({ mountRoot: path.join(base, 'unused'), leaseTtlSeconds: 2, reclaimOlderThanMs: 1_000, seed: SEED });
  for (let i = 0; i < LANES; i++) {
    const dir = path.join(base, `lane${i}`);
    const lane: Lane = {
      index: i,
      env: emu.createEnvironment({ name: `crash lane ${i}` }),
      mnt: path.join(dir, 'mnt'),
      stateDir: path.join(dir, 'state'),
      workdir: path.join(dir, 'work'),
      child: undefined,
    };
    await fsp.mkdir(lane.mnt, { recursive: true });
    await fsp.mkdir(lane.workdir, { recursive: true });
    lanes.push(lane);
  }
});

afterAll(async () => {
  await Promise.all(lanes.map((l) => l.child?.stop()));
  if (process.env['CRASH_DUMP'])
    for (const l of lanes) fs.writeFileSync(path.join(os.tmpdir(), `crash-lane${l.index}.log`), l.child?.stderr ?? '');
  await emu?.close();
  if (base) await fsp.rm(base, { recursive: true, force: true });
});

function startChild(lane: Lane): WorkerChild {
  return new WorkerChild({
    CRASH_BASE_URL: emu.baseURL,
    CRASH_ENVIRONMENT_ID: lane.env.id,
    CRASH_ENVIRONMENT_KEY: lane.env.key,
    CRASH_WORKDIR: lane.workdir,
    CRASH_STATE_DIR: lane.stateDir,
  });
}

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** True once the session is terminated and every item of it is stopped; false if it failed (its item stopped without an end). */
async function sessionSettles(sessionId: string, lane: Lane, timeoutMs: number): Promise<{ ok: boolean; error?: string }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const items = emu.workItems().filter((w) => w.sessionId === sessionId);
    const allStopped = items.length > 0 && items.every((w) => w.state === 'stopped');
    if (emu.session(sessionId).status === 'terminated' && allStopped) return { ok: true };
    const failed = lane.child?.events.find((e) => e.event === 'workFailed' && e.sessionId === sessionId);
    if (failed && allStopped) return { ok: false, error: String(failed.error) };
    if (Date.now() > deadline) {
      return {
        ok: false,
        error: `not ended after ${timeoutMs} ms (agent: ${emu.session(sessionId).scriptProgress}; items: ${items.map((w) => w.state).join(', ')})`,
      };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

const content = (kill: KillPoint, n: number): string =>
  `${CRASH_TAG}k${kill.index}-w${n}\nwritten by the agent before kill ${kill.index}\n`;

async function runCase(lane: Lane, kill: KillPoint): Promise<CaseResult> {
  const result: CaseResult = {
    kill,
    folderAtKill: false,
    editsAtKill: 0,
    toStore: 0,
    replacedOnStore: 0,
    asCopy: 0,
    lost: [],
    pathLeft: false,
    journalLeft: 0,
    duplicates: [],
    timings: '',
  };
  const t0 = Date.now();
  const mark = (): string => ((Date.now() - t0) / 1000).toFixed(1);
  const root = path.join(lane.mnt, `crash-${kill.index}`);
  const seeded: Record<string, string> = { '/probe.md': 'probe\n' };
  // Three download pages to hang in; many top-level files for the unmount to be caught removing.
  const seededCount = kill.phase === 'download' ? 60 : 4;
  for (let m = 0; m < seededCount; m++) seeded[`/seeded/m${String(m).padStart(2, '0')}.md`] = `seeded ${m}\n`;
  if (kill.phase === 'unmount') for (let m = 0; m < 120; m++) seeded[`/u${String(m).padStart(3, '0')}.md`] = `seeded ${m}\n`;
  const store = await emu.createMemoryStore({ name: `crash ${kill.index}`, memories: seeded });
  const memoriesRoute = new RegExp(`^GET /v1/memory_stores/${store.id}/memories$`);
  const uploadRoute = new RegExp(`^POST /v1/memory_stores/${store.id}/memories`);

  let rule: FaultHandle | undefined;
  let reached = false;
  const writes: Array<ScriptStep<Emulator>> = Array.from({ length: kill.writes }, (_, n) => ({
    tool: 'write',
    input: { file_path: `${root}/${n % 2 === 0 ? 'notes' : 'seeded'}/k${kill.index}-w${n}.md`, content: content(kill, n) },
  }));
  // An edit of a seeded memory too, so recovery has an update (with its precondition) as well as creates.
  writes.push({ tool: 'write', input: { file_path: `${root}/seeded/m00.md`, content: content(kill, 99) } });
  const after: Array<ScriptStep<Emulator>> = [
    { tool: 'write', input: { file_path: `${root}/after-${kill.index}.md`, content: content(kill, 100) } },
  ];
  let script: Array<ScriptStep<Emulator>>;
  switch (kill.phase) {
    case 'download':
      rule = emu.faults.add({ route: memoriesRoute, hang: true, skip: kill.skip, times: 1 });
      script = [...writes, ...after];
      break;
    case 'edit':
      script = [...writes, { console: () => void (reached = true) }, { sleepMs: 1_000 }, ...after];
      break;
    case 'uploads':
      rule = emu.faults.add({ route: uploadRoute, hang: true, skip: kill.skip, times: 1 });
      // The trailing sync comes one interval (5 s) after the download.
      script = [...writes, { sleepMs: 6_500 }, ...after];
      break;
    case 'final':
      script = [...writes, { console: (e) => void (rule = e.faults.add({ route: uploadRoute, hang: true, skip: kill.skip, times: 1 })) }];
      break;
    case 'unmount':
      script = [...writes];
      break;
  }
  const { sessionId } = await emu.createSession({
    environmentId: lane.env.id,
    resources: [{ memoryStoreId: store.id, access: 'read_write', mountPath: root }],
    script,
  });
  // The session's tools run sandboxed: its copy of the store is a folder of its own in the state
  // folder, bound at `root` in its sandbox.
  const hostRoot = hostFolder(lane, store.id, root, sessionId);

  // Wait for the kill point, then SIGKILL.
  const child = lane.child!;
  const trigger: Record<Phase, () => Promise<void>> = {
    download: () => until(() => (rule?.hits ?? 0) >= 1, 30_000, 'the hung download page'),
    edit: () => until(() => reached, 30_000, 'the edits'),
    uploads: () => until(() => (rule?.hits ?? 0) >= 1, 30_000, 'the hung upload'),
    // When an earlier sync already uploaded every file, the final sync has nothing to hang in:
    // the kill then lands right after it, still before the unmount.
    final: () =>
      until(
        () =>
          (rule?.hits ?? 0) >= 1 ||
          child.events.some((e) => e.event === 'synced' && e.sessionId === sessionId && e.phase === 'final' && e.storeId === undefined),
        30_000,
        'the hung final upload',
      ),
    // The first removal of a file nobody else touches (probe.md, uNNN.md) is the unmount at work.
    unmount: async () => {
      await child.waitFor((e) => e.event === 'mounted' && e.sessionId === sessionId, 20_000, 'the mount');
      await new Promise<void>((resolve, reject) => {
        const watcher = fs.watch(hostRoot, (type, name) => {
          if (type === 'rename' && name !== null && /^(u\d+|probe)\.md$/.test(String(name))) done();
        });
        const timer = setTimeout(() => done(new Error('no removal seen within 20000 ms')), 20_000);
        const done = (err?: Error): void => {
          clearTimeout(timer);
          watcher.close();
          if (err) reject(err);
          else resolve();
        };
      });
    },
  };
  try {
    await trigger[kill.phase]();
  } catch (e) {
    result.harnessError = (e as Error).message;
  }
  if (kill.delayMs > 0 && kill.phase !== 'unmount') await new Promise((r) => setTimeout(r, kill.delayMs));
  await child.kill();
  const killedAt = mark();
  rule?.remove();
  result.folderAtKill = fs.existsSync(hostRoot);
  if (kill.phase === 'unmount') result.unmountState = unmountState(hostRoot);
  const atKill = taggedFiles(hostRoot);
  result.editsAtKill = Object.keys(atKill).length;

  // Restart on the same state folder; the item comes back once its lease lapses.
  lane.child = startChild(lane);
  const first = await sessionSettles(sessionId, lane, 90_000);
  const firstAt = mark();
  if (!first.ok) {
    result.blocked = `the redelivered item: ${first.error}`;
    if (emu.session(sessionId).status !== 'terminated') emu.archiveSession(sessionId);
    await until(
      () =>
        emu
          .workItems()
          .filter((w) => w.sessionId === sessionId)
          .every((w) => w.state === 'stopped'),
      20_000,
      'the item to stop',
    ).catch(() => {});
  }

  // A new session of the same store must mount the path.
  const probe = await emu.createSession({
    environmentId: lane.env.id,
    resources: [{ memoryStoreId: store.id, access: 'read_write', mountPath: root }],
    script: [{ tool: 'read', input: { file_path: `${root}/probe.md` } }],
  });
  const second = await sessionSettles(probe.sessionId, lane, 60_000);
  const read = emu.session(probe.sessionId).toolResults[0];
  if (!second.ok || read === undefined || read.isError) {
    result.blocked = `${result.blocked ? `${result.blocked}; ` : ''}a new session of the store: ${second.error ?? (read ? read.text : 'no read')}`;
    if (emu.session(probe.sessionId).status !== 'terminated') emu.archiveSession(probe.sessionId);
  }
  const probeRoot = hostFolder(lane, store.id, root, probe.sessionId);
  // A copy whose session did not come back (killed in its final sync: the session had ended) is
  // not adopted by another session of the store, which holds a copy of its own: the operator's
  // `recover` uploads it. Entries of the running worker are left alone.
  if (fs.existsSync(hostRoot)) {
    const lines = await recoverLeftovers({ client: emu.client(), stateDir: lane.stateDir, logger: pino({ level: 'silent' }) });
    result.recovered = lines.filter((l) => l.root === hostRoot).length;
  }
  result.pathLeft = [root, hostRoot, probeRoot].some((p) => fs.existsSync(p));
  if (result.blocked && process.env['CRASH_VERBOSE']) {
    const c = lane.child!;
    result.blocked += ` [worker ${c.proc.pid} ${c.proc.exitCode === null && c.proc.signalCode === null ? 'running' : `exited ${c.proc.exitCode ?? c.proc.signalCode}`}; stderr: ${c.stderr.slice(-1500)}]`;
  }
  result.timings = `kill ${killedAt} s, redelivered item done ${firstAt} s, new session done ${mark()} s`;

  // A journal entry never outlives its folder.
  result.journalLeft = [root, hostRoot, probeRoot].reduce((n, p) => n + journalEntriesFor(lane.stateDir, p), 0);

  // Every edit on disk at the kill: in the store, replaced in the store after reaching it, or copied.
  const current = emu.memories(store.id);
  const history = emu.memoryHistory(store.id);
  // Copies only: the sessions' own store folders (a leftover not yet adopted) are not copies.
  const copies = allContents(lane.stateDir, [path.join(lane.stateDir, SESSION_STORES_FOLDER)]);
  for (const [rel, bytes] of Object.entries(atKill)) {
    const p = `/${rel}`;
    if (current[p] === bytes) result.toStore++;
    else if (history.some((w) => w.op !== 'delete' && w.path === p && w.content === bytes)) result.replacedOnStore++;
    else if (copies.has(bytes)) result.asCopy++;
    else result.lost.push(`${p}: ${bytes.split('\n', 1)[0]}`);
  }
  const where = new Map<string, Set<string>>();
  for (const w of history) {
    if (w.op === 'delete' || !w.content?.startsWith(CRASH_TAG)) continue;
    where.set(w.content, (where.get(w.content) ?? new Set()).add(w.path));
  }
  for (const [bytes, paths] of where) if (paths.size > 1) result.duplicates.push(`${bytes.split('\n', 1)[0]} at ${[...paths].join(', ')}`);
  const byContent = new Map<string, number>();
  for (const c of Object.values(current)) if (c.startsWith(CRASH_TAG)) byContent.set(c, (byContent.get(c) ?? 0) + 1);
  for (const [bytes, n] of byContent) if (n > 1) result.duplicates.push(`${bytes.split('\n', 1)[0]} held ${n} times`);

  // Leave the lane usable for its next kill whatever happened.
  if (result.pathLeft) for (const p of [root, hostRoot, probeRoot]) await fsp.rm(p, { recursive: true, force: true });
  return result;
}

/** The host folder of a session's own copy of the store attached at `root`. */
function hostFolder(lane: Lane, storeId: string, root: string, sessionId: string): string {
  return placeStores([{ memory_store_id: storeId, mount_path: root }], lane.workdir, sessionStoresFolder(lane.stateDir, sessionId))[0]!
    .hostPath;
}

function journalEntriesFor(stateDir: string, root: string): number {
  const dir = path.join(stateDir, 'journal');
  let n = 0;
  for (const name of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
    try {
      if ((JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')) as { root?: unknown }).root === root) n++;
    } catch {
      /* a temp file or a torn write: not an entry */
    }
  }
  return n;
}

function unmountState(root: string): 'intact' | 'partly removed' | 'gone' {
  if (!fs.existsSync(root)) return 'gone';
  const names = new Set(fs.readdirSync(root));
  const all =
    names.has('.anthropic-memory-store') &&
    names.has('probe.md') &&
    Array.from({ length: 120 }, (_, m) => `u${String(m).padStart(3, '0')}.md`).every((n) => names.has(n));
  return all ? 'intact' : 'partly removed';
}

function tally(rs: CaseResult[]): string {
  const lines: string[] = [];
  const phases = ['download', 'edit', 'uploads', 'final', 'unmount'];
  lines.push(`crash test: seed ${SEED}, ${rs.length} kills`);
  lines.push(
    `kill points: ${rs.map((r) => `${r.kill.index}:${r.kill.phase}(w${r.kill.writes},s${r.kill.skip},+${r.kill.delayMs}ms)`).join(' ')}`,
  );
  lines.push(`kills per phase: ${phases.map((p) => `${p} ${rs.filter((r) => r.kill.phase === p).length}`).join(', ')}`);
  const states = ['intact', 'partly removed', 'gone'] as const;
  lines.push(`unmount kills found the folder: ${states.map((st) => `${st} ${rs.filter((r) => r.unmountState === st).length}`).join(', ')}`);
  const sum = (f: (r: CaseResult) => number): number => rs.reduce((n, r) => n + f(r), 0);
  lines.push(
    `edits on disk at the kill: ${sum((r) => r.editsAtKill)}; recovered to store ${sum((r) => r.toStore)}, ` +
      `reached the store then replaced ${sum((r) => r.replacedOnStore)}, kept as copy ${sum((r) => r.asCopy)}, lost ${sum((r) => r.lost.length)}`,
  );
  lines.push(
    `path blocked after restart: ${rs.filter((r) => r.blocked).length}; path left after the new session: ${rs.filter((r) => r.pathLeft).length}; ` +
      `journal entries left: ${sum((r) => r.journalLeft)}; copies left to recover: ${sum((r) => r.recovered ?? 0)}; ` +
      `duplicates: ${sum((r) => r.duplicates.length)}; harness errors: ${rs.filter((r) => r.harnessError).length}`,
  );
  for (const r of rs) {
    const problems = [
      ...(r.harnessError ? [`harness: ${r.harnessError.split('\n', 1)[0]}`] : []),
      ...(r.blocked ? [`blocked: ${r.blocked}`] : []),
      ...(r.pathLeft ? ['path left'] : []),
      ...(r.journalLeft > 0 ? [`${r.journalLeft} journal entry left`] : []),
      ...r.lost.map((l) => `lost ${l}`),
      ...r.duplicates.map((d) => `duplicate ${d}`),
    ];
    if (process.env['CRASH_VERBOSE']) lines.push(`  kill ${r.kill.index} (${r.kill.phase}): ${r.timings}`);
    if (problems.length > 0)
      lines.push(`  kill ${r.kill.index} (${r.kill.phase}, folder at kill: ${r.folderAtKill ? 'yes' : 'no'}): ${problems.join('; ')}`);
  }
  return lines.join('\n');
}

describe('a worker killed with SIGKILL', () => {
  // About two minutes on an idle machine; the bound leaves room for a loaded one.
  it(`loses no edit and blocks no path, at ${KILLS} seeded kill points`, { timeout: 480_000 }, async () => {
    const plan = planKills(SEED, KILLS, ONLY as Phase[] | undefined);
    console.log(`crash test kill plan (seed ${SEED}): ${plan.map((k) => `${k.index}:${k.phase}`).join(' ')}`);
    await Promise.all(
      lanes.map(async (lane) => {
        lane.child = startChild(lane);
        await lane.child.waitFor((e) => e.event === 'started', 90_000, 'start');
        for (const kill of plan.filter((k) => k.index % LANES === lane.index)) {
          results.push(await runCase(lane, kill));
        }
      }),
    );
    results.sort((a, b) => a.kill.index - b.kill.index);
    console.log(tally(results));

    expect(results).toHaveLength(KILLS);
    expect(new Set(results.map((r) => r.kill.phase)).size).toBe(Math.min(ONLY?.length ?? 5, KILLS));
    expect(results.reduce((n, r) => n + r.editsAtKill, 0)).toBeGreaterThan(0);
    expect(results.filter((r) => r.harnessError).map((r) => `${r.kill.index}: ${r.harnessError}`)).toEqual([]);
    expect(results.flatMap((r) => r.lost.map((l) => `kill ${r.kill.index} (${r.kill.phase}): ${l}`))).toEqual([]);
    expect(results.filter((r) => r.blocked).map((r) => `kill ${r.kill.index} (${r.kill.phase}): ${r.blocked}`)).toEqual([]);
    expect(results.filter((r) => r.pathLeft).map((r) => r.kill.index)).toEqual([]);
    expect(results.filter((r) => r.journalLeft > 0).map((r) => r.kill.index)).toEqual([]);
    expect(results.flatMap((r) => r.duplicates)).toEqual([]);
  });
});
