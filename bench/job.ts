/**
 * One benchmark job: a fresh emulator (served by this process, with latency), a fresh temp folder
 * (mount parent, workdir, state dir; on tmpfs by default) and one child process running the worker under test. The
 * child reports its own CPU and peak RSS; timings come from the emulator's request log.
 */
import { fork, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { startEmulator, type Emulator, type RequestRecord } from '../src/testing/index.js';
import type { ChildKind } from './build-children.js';
import type { ChildConfig, ChildMessage, FloorConfig, Usage } from './child/protocol.js';
import { createCpuGroup, type CpuGroup } from './cpu-group.js';

export interface ChildHandle {
  /** The child's process id. */
  readonly pid: number;
  /** Usage right after the child loaded its modules and built its worker. */
  readonly readyUsage: Usage;
  /** Usage now; with `gc`, after a full garbage collection (a child started with `--expose-gc`). */
  usage(opts?: { gc?: boolean }): Promise<Usage>;
  /** Stop the worker, wait for it, and return the final usage. */
  stop(): Promise<Usage>;
}

export interface JobContext {
  emu: Emulator;
  mountRoot: string;
  kind: ChildKind;
  /** The child is this library's worker: kind `ours`, or `official` replaced by ours as of `--base`. */
  runsOurs: boolean;
  quick: boolean;
  /** Folder of the job's own (tmpfs by default), for files a scenario needs. */
  tmp: string;
  startChild(opts?: {
    concurrency?: number;
    floor?: FloorConfig;
    execArgv?: string[];
    sandbox?: ChildConfig['sandbox'];
    /** The environment the child serves (another one of the emulator's); default: the emulator's own. */
    environment?: { id: string; key: string };
    /** A name for a workdir and state folder of the child's own; default: the job's, shared by its children. */
    folder?: string;
  }): Promise<ChildHandle>;
}

export interface JobOptions {
  kind: ChildKind;
  /** Set when the `official` bundle is ours as of another commit (`--base`). */
  oursAsBase?: boolean;
  bundle: string;
  latencyMs: number;
  quick: boolean;
  /** Extra Node flags for the child (e.g. `--cpu-prof`). */
  execArgv?: string[];
  /** Folder the job's temp folder (mount parent, workdir, state dir) is made in. */
  tempParent: string;
}

/**
 * Where jobs put their folders by default: tmpfs (`/dev/shm`) when the host has one, so both
 * workers write to memory and the figures measure the workers rather than the host's disk.
 */
export function defaultTempParent(): string {
  try {
    if (fs.statSync('/dev/shm').isDirectory()) {
      fs.accessSync('/dev/shm', fs.constants.W_OK);
      return '/dev/shm';
    }
  } catch {
    // No tmpfs there: the system temp folder.
  }
  return os.tmpdir();
}

const CHILD_STOP_TIMEOUT_MS = 30_000;
const CHILD_EXIT_GRACE_MS = 5_000;

/** Run `body` with a fresh emulator and temp folder; everything is torn down afterwards. */
export async function withJob<T>(opts: JobOptions, body: (ctx: JobContext) => Promise<T>): Promise<T> {
  const tmp = await fsp.mkdtemp(path.join(opts.tempParent, 'maw-bench-'));
  const mountRoot = path.join(tmp, 'mnt');
  const workdir = path.join(tmp, 'work');
  const stateDir = path.join(tmp, 'state');
  await Promise.all([fsp.mkdir(mountRoot), fsp.mkdir(workdir)]);
  const emu = await startEmulator({ mountRoot, latencyMs: opts.latencyMs, leaseTtlSeconds: 30 });
  const children: ChildProcess[] = [];
  const exits: Promise<unknown>[] = [];
  const groups: CpuGroup[] = [];
  try {
    return await body({
      emu,
      mountRoot,
      kind: opts.kind,
      runsOurs: opts.kind === 'ours' || (opts.kind === 'official' && opts.oursAsBase === true),
      quick: opts.quick,
      tmp,
      startChild: async (c = {}) => {
        const own = c.folder !== undefined ? path.join(tmp, `child-${c.folder}`) : undefined;
        if (own !== undefined) await fsp.mkdir(path.join(own, 'work'), { recursive: true });
        const config: ChildConfig = {
          baseURL: emu.baseURL,
          environmentId: c.environment?.id ?? emu.environmentId,
          environmentKey: c.environment?.key ?? emu.environmentKey,
          workdir: own !== undefined ? path.join(own, 'work') : workdir,
          stateDir: own !== undefined ? path.join(own, 'state') : stateDir,
          concurrency: c.concurrency ?? 1,
          memorySyncIntervalMs: 5_000,
          ...(c.floor !== undefined ? { floor: c.floor } : {}),
          ...(c.sandbox !== undefined ? { sandbox: c.sandbox } : {}),
        };
        const { child, handle, group } = await spawnChild(opts.bundle, config, [...(opts.execArgv ?? []), ...(c.execArgv ?? [])]);
        children.push(child);
        if (group) groups.push(group);
        exits.push(new Promise((resolve) => child.once('exit', resolve)));
        return handle;
      },
    });
  } finally {
    // A stopped child exits by itself (and writes its CPU profile, if any); a stuck one is killed.
    await Promise.race([Promise.all(exits), new Promise((r) => setTimeout(r, CHILD_EXIT_GRACE_MS).unref())]);
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    // Each child's CPU group goes once the last process counted in it (a sandbox's init) is gone.
    for (let i = 0; i < 50 && groups.some((g) => !g.remove()); i++) await new Promise((r) => setTimeout(r, 100));
    await emu.close();
    await fsp.rm(tmp, { recursive: true, force: true });
  }
}

async function spawnChild(
  bundle: string,
  config: ChildConfig,
  execArgv: string[],
): Promise<{ child: ChildProcess; handle: ChildHandle; group: CpuGroup | undefined }> {
  const child = fork(bundle, [JSON.stringify(config)], { execArgv, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  // Moved into a CPU group of its own before it has started anything, so what it starts is counted.
  const group = child.pid !== undefined ? createCpuGroup(child.pid) : undefined;
  const counted = (u: Usage): Usage => (group ? { ...u, cpuMs: group.cpuMs() } : u);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString('utf8')).slice(-4000);
  });
  const waiters = new Map<number | 'ready' | 'stopped', (m: ChildMessage) => void>();
  let nextId = 1;
  let exited: Error | undefined;
  const fail = (e: Error): void => {
    exited = e;
    for (const w of waiters.values()) w({ type: 'stopped', usage: { cpuMs: NaN, maxRssMiB: NaN }, error: e.message });
    waiters.clear();
  };
  // 'close', not 'exit': a child that sends 'stopped' and exits has its message read before the
  // channel closes, where its exit can be seen first on a loaded host.
  child.on('close', (code, signal) =>
    fail(new Error(`bench child ${path.basename(bundle)} exited (code ${code}, signal ${signal}); stderr:\n${stderr}`)),
  );
  child.on('message', (m: ChildMessage) => {
    const key = m.type === 'usage' ? m.id : m.type;
    const w = waiters.get(key);
    waiters.delete(key);
    w?.(m);
  });
  const ask = (key: number | 'ready' | 'stopped', send?: () => void): Promise<ChildMessage> =>
    new Promise((resolve, reject) => {
      if (exited) return reject(exited);
      waiters.set(key, resolve);
      send?.();
    });
  const ready = await ask('ready');
  if (ready.type !== 'ready') throw new Error(`bench child did not start: ${ready.type === 'stopped' ? ready.error : ready.type}`);
  const handle: ChildHandle = {
    pid: child.pid ?? -1,
    readyUsage: counted(ready.usage),
    async usage(o = {}) {
      const id = nextId++;
      const m = await ask(id, () => child.send({ type: 'usage', id, ...(o.gc === true ? { gc: true } : {}) }));
      if (m.type === 'stopped') throw new Error(m.error ?? 'bench child stopped');
      return counted(m.usage);
    },
    async stop() {
      const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_STOP_TIMEOUT_MS);
      try {
        const m = await ask('stopped', () => child.send({ type: 'stop' }));
        if (m.type !== 'stopped') throw new Error(`bench child answered ${m.type} to stop`);
        if (m.error !== undefined) throw new Error(`the worker under test failed: ${m.error}\nstderr:\n${stderr}`);
        return counted(m.usage);
      } finally {
        clearTimeout(timer);
      }
    },
  };
  return { child, handle, group };
}

/** Requests of one route (its template, e.g. `POST /v1/sessions/:id/events`) whose path contains `needle`. */
export function requestsOf(emu: Emulator, route: string, needle = ''): RequestRecord[] {
  return emu.requests.filter((r) => r.route === route && r.path.includes(needle)).sort((a, b) => a.startedAt - b.startedAt);
}

export const ROUTES = {
  ack: 'POST /v1/environments/:id/work/:workId/ack',
  stop: 'POST /v1/environments/:id/work/:workId/stop',
  events: 'POST /v1/sessions/:id/events',
  stream: 'GET /v1/sessions/:id/events/stream',
  listMemories: 'GET /v1/memory_stores/:id/memories',
  retrieveMemory: 'GET /v1/memory_stores/:id/memories/:memoryId',
  createMemory: 'POST /v1/memory_stores/:id/memories',
} as const;

export const endOf = (r: RequestRecord): number => r.startedAt + r.ms;
