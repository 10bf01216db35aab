/**
 * The harness of the hostile-input suite. Each case runs against one shared emulator, in its own
 * temp folder holding the mount parent, the state folder and an `outside` folder with bait files.
 * A case calls `ctx.armed()` when the hostile part starts; the harness then checks that nothing
 * outside the mount parent and the state folder changed since, that no unhandled rejection
 * happened, that no credential reached a log line or an event, and that a warning or the error
 * names the expected path and says what happens or what to do.
 */
import type { EventEmitter } from 'node:events';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type Anthropic from '@anthropic-ai/sdk';
import { MemoryMounter, SyncLoop, type MemoryMounterOptions, type MountedSession } from '../../src/memory/index.js';
import type { Emulator } from '../../src/testing/index.js';
import { snapshotTree, type TreeSnapshot } from '../memory/fs-snapshot.js';
import { captureLogger } from '../memory/int-helpers.js';

export type HostileGroup =
  | 'server paths'
  | 'planted entries'
  | 'huge and binary files'
  | 'marker tampering'
  | 'mount-path tricks'
  | 'stores and duplicate paths'
  | 'permission changes'
  | 'deep trees'
  | 'endless or malformed listings'
  | 'webhook abuse';

export interface Mount {
  root: string;
  storeId: string;
  client: Anthropic;
  mounted: MountedSession;
  loop: SyncLoop;
}

export interface Ctx {
  emu: Emulator;
  tmp: string;
  mountRoot: string;
  stateDir: string;
  /** A folder outside the mount with bait files (`secret.md`, `deep/inner.md`). */
  outside: string;
  log: ReturnType<typeof captureLogger>;
  events: unknown[];
  /** Credentials that must never appear in a log line or an event. */
  secrets: string[];
  /** What a caller was answered (webhook responses): checked like warnings. */
  answers: string[];
  /** Start of the hostile part: the "before" snapshot is taken now. */
  armed(): Promise<void>;
  /** A store with these memories. */
  store(memories?: Record<string, string>): Promise<string>;
  /** Mount one store (created unless given) at `<mountRoot>/<slug>` and start its sync loop. */
  mount(opts?: { memories?: Record<string, string>; storeId?: string; mounter?: Partial<MemoryMounterOptions> }): Promise<Mount>;
  /** Open a session with these store attachments and mount it (for the refusal cases). */
  mountResources(
    resources: Array<{ memoryStoreId: string; mountPath?: string | null }>,
    mounter?: Partial<MemoryMounterOptions>,
  ): Promise<MountedSession>;
}

export interface HostileCase {
  group: HostileGroup;
  description: string;
  run(ctx: Ctx): Promise<void>;
  /** The path (or store id) a warning or the error must name, and what it must say. */
  expects: { path: string | ((ctx: Ctx) => string); says: RegExp };
}

export const SECRET_BAIT = 'OUTSIDE-BAIT-BYTES';

let counter = 0;

export async function newCtx(emu: Emulator): Promise<{ ctx: Ctx; before: () => TreeSnapshot | undefined; dispose(): Promise<void> }> {
  const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-hostile-'));
  const mountRoot = path.join(tmp, 'mnt');
  const stateDir = path.join(tmp, 'state');
  const outside = path.join(tmp, 'outside');
  await fsp.mkdir(mountRoot);
  await fsp.mkdir(path.join(outside, 'deep'), { recursive: true });
  await fsp.writeFile(path.join(outside, 'secret.md'), `${SECRET_BAIT} secret`);
  await fsp.writeFile(path.join(outside, 'deep', 'inner.md'), `${SECRET_BAIT} inner`);
  const log = captureLogger();
  const events: unknown[] = [];
  const secrets = [emu.apiKey, emu.environmentKey];
  const loops: SyncLoop[] = [];
  let snapshot: TreeSnapshot | undefined;

  const openSession = async (resources: Array<{ memoryStoreId: string; mountPath?: string | null }>) => {
    const { sessionId } = await emu.createSession({ resources });
    const token = emu.sessionsToken(sessionId);
    const workSecret = emu.workSecret(sessionId);
    if (token) secrets.push(token);
    if (workSecret) secrets.push(workSecret);
    const client = emu.sessionClient(sessionId, { maxRetries: 0 });
    return { client, session: await client.beta.sessions.retrieve(sessionId) };
  };
  const newMounter = (client: Anthropic, extra: Partial<MemoryMounterOptions> = {}): MemoryMounter => {
    const m = new MemoryMounter({ client, logger: log.logger, ...extra });
    for (const name of ['mounted', 'unmounted', 'refused']) (m as EventEmitter).on(name, (p: unknown) => events.push({ name, p }));
    return m;
  };

  const ctx: Ctx = {
    emu,
    tmp,
    mountRoot,
    stateDir,
    outside,
    log,
    events,
    secrets,
    answers: [],
    async armed() {
      snapshot = await snapshotTree(tmp, [mountRoot, stateDir]);
    },
    async store(memories = { '/a.md': 'a', '/sub/b.md': 'b' }) {
      return (await emu.createMemoryStore({ name: `hostile ${++counter}`, memories })).id;
    },
    async mount(opts = {}) {
      const storeId = opts.storeId ?? (await ctx.store(opts.memories));
      const root = path.join(mountRoot, `store-${++counter}`);
      const { client, session } = await openSession([{ memoryStoreId: storeId, mountPath: root }]);
      const mounted = await newMounter(client, opts.mounter).mount(session);
      const loop = new SyncLoop({ client, mounted, logger: log.logger, stateDir, intervalMs: 5_000, finalFlushMs: 10_000 });
      for (const name of ['uploaded', 'deleted', 'refused', 'conflict', 'synced', 'flushCutOff', 'unmounted']) {
        (loop as EventEmitter).on(name, (p: unknown) => events.push({ name, p }));
      }
      loops.push(loop);
      return { root, storeId, client, mounted, loop };
    },
    async mountResources(resources, mounter = {}) {
      const { client, session } = await openSession(resources);
      return newMounter(client, mounter).mount(session);
    },
  };
  return {
    ctx,
    before: () => snapshot,
    async dispose() {
      for (const loop of loops) await loop.finish({ clean: false }).catch(() => {});
      emu.faults.clear();
      await removeTree(tmp);
    },
  };
}

/** Remove a test folder whatever it holds (trees deeper than PATH_MAX included). */
async function removeTree(abs: string): Promise<void> {
  const { LocalDir } = await import('../../src/memory/disk/local-dir.js');
  await new LocalDir(abs).removeRoot().catch(() => fsp.rm(abs, { recursive: true, force: true }));
}
