// Pins the sync rules end to end on a model: random interleavings of agent edits/creates/
// deletes, Console edits/deletes, syncs with lost responses and 409 races, agent writes racing a
// sync, wiped folders, unsafe server paths, read-only stores and the three deletion modes. A
// simulated executor applies each planned action to in-memory local/remote maps with the
// server's precondition semantics and feeds the outcome to applyOutcome. After a clean final
// sync: every non-conflicting local edit is in the store, every conflict ended with the store's
// version locally (the losing bytes kept as a conflict copy), nothing was written from a
// read-only store, log_only/disabled never deleted remotely, no unsafe path was touched, and a
// further sync with nothing changed plans only noops.
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkRelPath } from '../../../src/memory/rules/paths.js';
import {
  isRemoteWrite,
  planSync,
  type LocalEntry,
  type RemoteEntry,
  type SyncAction,
  type SyncPhase,
} from '../../../src/memory/rules/plan.js';
import { applyOutcome, completeGeneration, createSyncState, type ActionOutcome } from '../../../src/memory/rules/sync-state.js';
import type { MemoryAccess, MemoryDeleteMode, StoreSyncState } from '../../../src/memory/rules/types.js';

// ---- the world ---------------------------------------------------------------------------------

const PATHS = ['a.md', 'b.md', 'notes/c.md', 'notes/deep/d.md'];
const BAD_KEYS = ['../evil.md', '.anthropic-memory-store', 'x//y.md', '.maw-tmp-123', 'a\\b.md'];
/** Contents the Console can write. */
const TEXTS = ['x', 'y', 'z', 'w'];
/** The server refuses this content (413): a `refused` outcome. */
const TOO_BIG = 'BIG';
/** The local scan cannot sync this content (not UTF-8): an `unsyncable` entry. */
const BINARY = 'BIN';

const shaCache = new Map<string, string>();
function sha(content: string): string {
  let hit = shaCache.get(content);
  if (hit === undefined) {
    hit = createHash('sha256').update(content).digest('hex');
    shaCache.set(content, hit);
  }
  return hit;
}

interface Memory {
  id: string;
  content: string;
}

interface World {
  access: MemoryAccess;
  deletions: MemoryDeleteMode;
  local: Map<string, string>;
  remote: Map<string, Memory>;
  state: StoreSyncState;
  nextId: number;
  /** Agent edits not yet known to be in the store or lost to a conflict, per path. */
  liveEdits: Map<string, string>;
  /** Local bytes the store's version replaced in a conflict. */
  conflictCopies: Array<{ path: string; content: string }>;
  remoteWrites: number;
  remoteDeletes: number;
  /** Paths present locally at the previous sync's scan. */
  presentAtLastScan: Set<string>;
  /** Paths the previous sync scanned and left with the same bytes locally, in the store and in the baseline. */
  inSyncAfterLastSync: Set<string>;
}

type Fault = 'ok' | 'lost-applied' | 'lost-not-applied' | 'transient';

type Command =
  | { type: 'agent-write'; path: string; content: string }
  | { type: 'agent-delete'; path: string }
  | { type: 'agent-wipe' }
  | { type: 'console-write'; path: string; content: string }
  | { type: 'console-delete'; path: string }
  | { type: 'plant-bad-key'; key: string }
  | {
      type: 'sync';
      phase: SyncPhase;
      faults: Fault[];
      consoleRace?: { path: string; content: string } | undefined;
      agentRace?: { path: string; content: string } | undefined;
    };

// ---- the model's bookkeeping -------------------------------------------------------------------

/** An agent write is an edit unless it leaves the bytes as they were or restores the last synced bytes. */
function agentWrite(world: World, path: string, content: string): void {
  if (world.local.get(path) === content) return;
  world.local.set(path, content);
  if (world.state.baseline[path]?.sha === sha(content)) world.liveEdits.delete(path);
  else world.liveEdits.set(path, content);
}

function consoleWrite(world: World, path: string, content: string): void {
  const existing = world.remote.get(path);
  if (existing) existing.content = content;
  else world.remote.set(path, { id: `mem_${world.nextId++}`, content });
}

function localEntry(content: string): LocalEntry {
  if (content === BINARY) return { kind: 'unsyncable', reason: 'not UTF-8', fingerprint: `fp:${content}` };
  return { kind: 'file', sha: sha(content), size: content.length };
}

function findById(world: World, id: string): [string, Memory] | undefined {
  for (const entry of world.remote) if (entry[1].id === id) return entry;
  return undefined;
}

/** The store keeps the new bytes: an agent edit is now safe. */
function landed(world: World, path: string, content: string): void {
  if (world.liveEdits.get(path) === content) world.liveEdits.delete(path);
}

// ---- the simulated executor --------------------------------------------------------------------

function execute(world: World, action: SyncAction, fault: Fault): ActionOutcome {
  const { path } = action;
  switch (action.kind) {
    case 'adopt': {
      // Both sides held these bytes at the scan: an agent edit with them is in the store.
      const current = world.local.get(path);
      if (current !== undefined && sha(current) === action.sha) landed(world, path, current);
      return { ok: true };
    }
    case 'noop':
    case 'forget':
    case 'await-delete':
    case 'refuse':
    case 'would-delete-remote':
      return { ok: true };

    case 'pull': {
      const found = findById(world, action.id);
      if (!found || found[0] !== path) return { ok: false, failure: 'not-found' };
      const current = world.local.get(path);
      if (action.why === 'conflict') {
        // Store wins; the losing local bytes are kept outside the mount.
        if (current !== undefined) {
          world.conflictCopies.push({ path, content: current });
          world.liveEdits.delete(path);
        }
      } else if ((current === undefined ? undefined : sha(current)) !== action.expectedLocalSha) {
        return { ok: false, failure: 'transient' }; // the agent wrote since the scan: decide next sync
      } else if (current !== undefined && world.liveEdits.get(path) === current) {
        throw new Error(`a non-conflict pull of ${path} would overwrite the live agent edit ${JSON.stringify(current)}`);
      }
      world.local.set(path, found[1].content);
      return { ok: true, id: found[1].id, sha: sha(found[1].content) };
    }

    case 'push-create':
    case 'push-update': {
      expect(world.access, `upload of ${path} from a read-only store`).toBe('read_write');
      const content = world.local.get(path);
      // The file changed since the scan: skip; the next sync sees the new version.
      if (content === undefined || sha(content) !== action.sha) return { ok: false, failure: 'transient' };
      if (content === BINARY) throw new Error(`upload of the unsyncable file ${path}`);
      if (fault === 'transient') return { ok: false, failure: 'transient' };
      if (content === TOO_BIG) return { ok: false, failure: 'refused', reason: '413 content too large' };
      let memory: Memory;
      if (action.kind === 'push-create') {
        if (world.remote.has(path)) return { ok: false, failure: 'precondition' }; // 409 path taken
        if (fault === 'lost-not-applied') return { ok: false, failure: 'lost-response' };
        memory = { id: `mem_${world.nextId++}`, content };
        world.remote.set(path, memory);
      } else {
        const found = findById(world, action.id);
        if (!found) return { ok: false, failure: 'not-found' };
        // The precondition passes when the memory already holds exactly the requested bytes.
        if (sha(found[1].content) !== action.expectedSha && found[1].content !== content) {
          return { ok: false, failure: 'precondition' };
        }
        if (fault === 'lost-not-applied') return { ok: false, failure: 'lost-response' };
        memory = found[1];
        memory.content = content;
      }
      world.remoteWrites++;
      landed(world, path, content);
      if (fault === 'lost-applied') return { ok: false, failure: 'lost-response' };
      return { ok: true, id: memory.id, sha: sha(content) };
    }

    case 'delete-remote': {
      expect(world.access, `remote delete of ${path} from a read-only store`).toBe('read_write');
      expect(world.deletions, `remote delete of ${path}`).toBe('enabled');
      if (fault === 'transient' || fault === 'lost-not-applied') return { ok: false, failure: 'transient' };
      const found = findById(world, action.id);
      if (!found) return { ok: false, failure: 'not-found' };
      if (sha(found[1].content) !== action.expectedSha) return { ok: false, failure: 'precondition' };
      world.remote.delete(found[0]);
      world.remoteDeletes++;
      if (fault === 'lost-applied') return { ok: false, failure: 'lost-response' };
      return { ok: true };
    }

    case 'delete-local': {
      const current = world.local.get(path);
      if (current === undefined) return { ok: true };
      if (sha(current) !== action.expectedLocalSha) return { ok: false, failure: 'precondition' };
      if (world.liveEdits.get(path) === current) {
        // Only a read-only store follows a remote delete over a local edit.
        expect(world.access).toBe('read_only');
        world.liveEdits.delete(path);
      }
      world.local.delete(path);
      return { ok: true };
    }
  }
}

const FLUSH_KINDS = new Set(['push-create', 'push-update', 'adopt', 'forget', 'refuse', 'noop', 'await-delete']);

function listRemote(world: World): Map<string, RemoteEntry> {
  return new Map([...world.remote].map(([p, m]) => [p, { id: m.id, sha: sha(m.content) }]));
}

function runSync(world: World, cmd: Extract<Command, { type: 'sync' }>): SyncAction[] {
  const local = new Map([...world.local].map(([p, c]) => [p, localEntry(c)]));
  const plan = planSync({ state: world.state, local, remote: listRemote(world), deletions: world.deletions, phase: cmd.phase });

  // Judged by the model, independently of the planner's own bookkeeping:
  // a folder emptied at once (at least two files seen last time, none now) is never mass-deleted;
  const wipedNow = world.local.size === 0 && world.inSyncAfterLastSync.size > 1;
  for (const action of plan.actions) {
    if (wipedNow) expect(action.kind, `${action.path} after a wipe`).not.toBe('delete-remote');
    // outside the final sync, a remote delete needs an earlier scan that already saw the file missing.
    if (action.kind === 'delete-remote' && cmd.phase !== 'final') {
      expect(world.presentAtLastScan.has(action.path), `${action.path} deleted at first sight`).toBe(false);
    }
  }
  const scanned = new Set(world.local.keys());
  world.presentAtLastScan = scanned;

  for (const action of plan.actions) {
    // Nothing outside the store's key space is ever acted on.
    if (!checkRelPath(action.path).ok) expect(['noop', 'refuse']).toContain(action.kind);
    if (cmd.phase === 'flush') expect(FLUSH_KINDS.has(action.kind), `${action.kind} in a flush`).toBe(true);
    if (world.access === 'read_only') expect(isRemoteWrite(action), `${action.kind} from a read-only store`).toBe(false);
    if (world.deletions !== 'enabled') expect(action.kind).not.toBe('delete-remote');
    if (plan.wiped) expect(['delete-remote', 'delete-local']).not.toContain(action.kind);
  }

  // Races: a Console edit or an agent write lands between the listing/scan and the execution.
  if (cmd.consoleRace) consoleWrite(world, cmd.consoleRace.path, cmd.consoleRace.content);
  if (cmd.agentRace) agentWrite(world, cmd.agentRace.path, cmd.agentRace.content);

  let n = 0;
  for (const action of plan.actions) {
    const fault = isRemoteWrite(action) ? (cmd.faults[n++ % Math.max(1, cmd.faults.length)] ?? 'ok') : 'ok';
    const outcome = execute(world, action, fault);
    world.state = applyOutcome(world.state, action, outcome);
  }
  world.state = completeGeneration(world.state, cmd.phase);
  world.inSyncAfterLastSync = new Set(
    [...world.local]
      .filter(([p, c]) => scanned.has(p) && world.remote.get(p)?.content === c && world.state.baseline[p]?.sha === sha(c))
      .map(([p]) => p),
  );
  return plan.actions;
}

function apply(world: World, cmd: Command): void {
  switch (cmd.type) {
    case 'agent-write':
      agentWrite(world, cmd.path, cmd.content);
      return;
    case 'agent-delete':
      world.local.delete(cmd.path);
      world.liveEdits.delete(cmd.path);
      return;
    case 'agent-wipe':
      world.local.clear();
      world.liveEdits.clear();
      return;
    case 'console-write':
      consoleWrite(world, cmd.path, cmd.content);
      return;
    case 'console-delete':
      world.remote.delete(cmd.path);
      return;
    case 'plant-bad-key':
      world.remote.set(cmd.key, { id: `mem_${world.nextId++}`, content: 'evil' });
      return;
    case 'sync':
      runSync(world, cmd);
      return;
  }
}

// ---- generators --------------------------------------------------------------------------------

const pathArb = fc.constantFrom(...PATHS);
const agentContentArb = fc.constantFrom(...TEXTS, 'agent-1', 'agent-2', TOO_BIG, BINARY);
const consoleContentArb = fc.constantFrom(...TEXTS);
const faultArb = fc.constantFrom<Fault>('ok', 'ok', 'ok', 'lost-applied', 'lost-not-applied', 'transient');

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ type: fc.constant('agent-write' as const), path: pathArb, content: agentContentArb }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('agent-delete' as const), path: pathArb }) },
  { weight: 1, arbitrary: fc.constant({ type: 'agent-wipe' as const }) },
  { weight: 3, arbitrary: fc.record({ type: fc.constant('console-write' as const), path: pathArb, content: consoleContentArb }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('console-delete' as const), path: pathArb }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('plant-bad-key' as const), key: fc.constantFrom(...BAD_KEYS) }) },
  {
    weight: 5,
    arbitrary: fc.record({
      type: fc.constant('sync' as const),
      phase: fc.constantFrom<SyncPhase>('sync', 'sync', 'sync', 'flush'),
      faults: fc.array(faultArb, { minLength: 1, maxLength: 4 }),
      consoleRace: fc.option(fc.record({ path: pathArb, content: consoleContentArb }), { nil: undefined, freq: 4 }),
      agentRace: fc.option(fc.record({ path: pathArb, content: agentContentArb }), { nil: undefined, freq: 6 }),
    }),
  },
);

const setupArb = fc.record({
  access: fc.constantFrom<MemoryAccess>('read_write', 'read_write', 'read_only'),
  deletions: fc.constantFrom<MemoryDeleteMode>('enabled', 'log_only', 'disabled'),
  initial: fc.dictionary(pathArb, consoleContentArb, { maxKeys: 4 }),
});

/** A world right after a clean download of `initial`. */
function mounted(setup: { access: MemoryAccess; deletions: MemoryDeleteMode; initial: Record<string, string> }): World {
  const remote = new Map<string, Memory>();
  const local = new Map<string, string>();
  const baseline: StoreSyncState['baseline'] = {};
  let nextId = 1;
  for (const [path, content] of Object.entries(setup.initial)) {
    const id = `mem_${nextId++}`;
    remote.set(path, { id, content });
    local.set(path, content);
    baseline[path] = { id, sha: sha(content) };
  }
  return {
    access: setup.access,
    deletions: setup.deletions,
    local,
    remote,
    state: createSyncState({ storeId: 'memstore_prop', root: '/mnt/memory/prop', access: setup.access, baseline }),
    nextId,
    liveEdits: new Map(),
    conflictCopies: [],
    remoteWrites: 0,
    remoteDeletes: 0,
    presentAtLastScan: new Set(local.keys()),
    inSyncAfterLastSync: new Set(local.keys()),
  };
}

// ---- the checks after a clean final sync -------------------------------------------------------

function checkFinal(world: World): void {
  const unsyncedLocal = (content: string) => content === TOO_BIG || content === BINARY;

  // Nothing outside the store's key space reached the disk.
  for (const path of world.local.keys()) expect(checkRelPath(path).ok, `local path ${path}`).toBe(true);

  // Every non-conflicting agent edit is in the store, byte for byte (writable stores).
  if (world.access === 'read_write') {
    for (const [path, content] of world.liveEdits) {
      if (unsyncedLocal(content)) continue;
      expect(world.remote.get(path)?.content, `live edit of ${path}`).toBe(content);
    }
  }

  for (const path of PATHS) {
    const local = world.local.get(path);
    const memory = world.remote.get(path);
    const refused = world.state.refused[path]?.fingerprint;
    if (local !== undefined && unsyncedLocal(local)) continue;
    if (local !== undefined && memory !== undefined) {
      // Converged, except a read-only edit left alone (reported once).
      if (local !== memory.content) {
        expect(world.access, `${path}: local ${local} vs store ${memory.content}`).toBe('read_only');
        expect(refused).toBe(sha(local));
      }
    } else if (local !== undefined) {
      // A local file the store lacks: only a refused read-only file.
      expect(world.access, `${path} exists only locally`).toBe('read_only');
      expect(refused).toBe(sha(local));
    } else if (memory !== undefined) {
      // A memory the folder lacks: a deletion deliberately not synced.
      expect(world.access === 'read_only' || world.deletions !== 'enabled', `${path} exists only in the store`).toBe(true);
    }
  }

  if (world.access === 'read_only') expect(world.remoteWrites + world.remoteDeletes).toBe(0);
  if (world.deletions !== 'enabled') expect(world.remoteDeletes).toBe(0);
}

function checkIdle(world: World): void {
  // Re-running a sync with nothing changed plans only noops, twice over.
  for (let i = 0; i < 2; i++) {
    const actions = runSync(world, { type: 'sync', phase: 'sync', faults: ['ok'] });
    const busy = actions.filter((a) => a.kind !== 'noop');
    expect(busy, 'idle sync plans only noops').toEqual([]);
  }
}

describe('planSync against a model of the store', () => {
  it('converges after a clean final sync, keeps every non-conflicting edit and is then idle', () => {
    let runs = 0;
    fc.assert(
      fc.property(setupArb, fc.array(commandArb, { maxLength: 40 }), (setup, commands) => {
        runs++;
        const world = mounted(setup);
        for (const cmd of commands) apply(world, cmd);
        runSync(world, { type: 'sync', phase: 'final', faults: ['ok'] });
        checkFinal(world);
        checkIdle(world);
        // A flush after convergence uploads nothing.
        const flushed = runSync(world, { type: 'sync', phase: 'flush', faults: ['ok'] });
        expect(flushed.filter((a) => a.kind !== 'noop')).toEqual([]);
      }),
      { numRuns: Number(process.env.PLAN_PROPERTY_RUNS ?? 2000) },
    );
    expect(runs).toBe(Number(process.env.PLAN_PROPERTY_RUNS ?? 2000));
  });

  it('keeps the losing bytes of every conflict and ends with the store version locally', () => {
    fc.assert(
      fc.property(
        pathArb,
        consoleContentArb,
        fc.constantFrom('agent-1', 'agent-2'),
        fc.constantFrom<MemoryAccess>('read_write', 'read_only'),
        (path, remoteContent, agentContent, access) => {
          const world = mounted({ access, deletions: 'enabled', initial: { [path]: 'base' } });
          agentWrite(world, path, agentContent);
          consoleWrite(world, path, remoteContent);
          const actions = runSync(world, { type: 'sync', phase: 'sync', faults: ['ok'] });
          expect(actions).toContainEqual(expect.objectContaining({ kind: 'pull', path, why: 'conflict' }));
          expect(world.local.get(path)).toBe(remoteContent);
          expect(world.conflictCopies).toEqual([{ path, content: agentContent }]);
          expect(world.remote.get(path)?.content).toBe(remoteContent);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('settles a lost upload on the next listing without a duplicate create or a false conflict', () => {
    fc.assert(
      fc.property(pathArb, fc.constantFrom<Fault>('lost-applied', 'lost-not-applied'), fc.boolean(), (path, fault, editAgain) => {
        const world = mounted({ access: 'read_write', deletions: 'enabled', initial: {} });
        agentWrite(world, path, 'agent-1');
        runSync(world, { type: 'sync', phase: 'sync', faults: [fault] });
        if (editAgain) agentWrite(world, path, 'agent-2');
        runSync(world, { type: 'sync', phase: 'sync', faults: ['ok'] });
        expect(world.conflictCopies).toEqual([]);
        expect(world.remote.size).toBe(1);
        expect(world.remote.get(path)?.content).toBe(editAgain ? 'agent-2' : 'agent-1');
        expect(world.state.sentShas).toEqual({});
      }),
      { numRuns: 40 },
    );
  });

  it('a 409 race on upload ends with the store version locally and the edit in a conflict copy', () => {
    const world = mounted({ access: 'read_write', deletions: 'enabled', initial: { 'a.md': 'base' } });
    agentWrite(world, 'a.md', 'agent-1');
    const first = runSync(world, { type: 'sync', phase: 'sync', faults: ['ok'], consoleRace: { path: 'a.md', content: 'x' } });
    expect(first).toContainEqual(expect.objectContaining({ kind: 'push-update', path: 'a.md' }));
    expect(world.remote.get('a.md')?.content).toBe('x'); // the precondition held the upload back
    const second = runSync(world, { type: 'sync', phase: 'sync', faults: ['ok'] });
    expect(second).toContainEqual(expect.objectContaining({ kind: 'pull', path: 'a.md', why: 'conflict' }));
    expect(world.local.get('a.md')).toBe('x');
    expect(world.conflictCopies).toEqual([{ path: 'a.md', content: 'agent-1' }]);
  });
});
