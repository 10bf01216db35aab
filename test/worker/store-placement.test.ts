// Pins where a session's store folders live on the host: at their mount paths when shared; in a
// folder of the session's own under the state folder when its toolset is sandboxed (named only by
// plain ids, or a hash of anything else); the choice between the two; the allowed mount roots
// checked on the path the agent sees; and the start-up sweep of empty session folders.
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMountError } from '../../src/errors.js';
import type { SandboxRuntime } from '../../src/sandbox/runtime.js';
import {
  assertMountPathsAllowed,
  bindableAnywhere,
  EMPTY_SESSION_FOLDER_AGE_MS,
  placementFor,
  placeStores,
  SESSION_STORES_FOLDER,
  sessionStoresFolder,
  sessionWithHostPaths,
  sweepEmptySessionFolders,
} from '../../src/worker/store-placement.js';

const resources = [
  { memory_store_id: 'memstore_1', mount_path: '/mnt/memory/notes', access: 'read_write' },
  { memory_store_id: 'memstore_2', mount_path: '/mnt/memory/policy', access: 'read_only' },
];

const bwrap = (over: { readWritePaths?: string[]; readOnlyPaths?: string[] } = {}): SandboxRuntime =>
  ({
    kind: 'bwrap',
    bwrap: '/usr/bin/bwrap',
    layout: {
      system: [{ path: '/usr' }, { path: '/bin', symlinkTo: 'usr/bin' }],
      readOnly: ['/etc/passwd'],
      node: '/usr/bin/node',
      hostEntry: '/x',
    },
    options: { readOnlyPaths: over.readOnlyPaths ?? [], readWritePaths: over.readWritePaths ?? [] },
    userNamespace: false,
  }) as unknown as SandboxRuntime;

describe('placeStores', () => {
  it('shared: each store at its mount path, or the derived one', () => {
    const placed = placeStores([...resources, { memory_store_id: 'memstore_3', name: 'Team Notes', mount_path: null }], '/w', undefined);
    expect(placed).toEqual([
      { storeId: 'memstore_1', mountPath: '/mnt/memory/notes', hostPath: '/mnt/memory/notes', readOnly: false },
      { storeId: 'memstore_2', mountPath: '/mnt/memory/policy', hostPath: '/mnt/memory/policy', readOnly: true },
      { storeId: 'memstore_3', mountPath: '/w/memory/team-notes', hostPath: '/w/memory/team-notes', readOnly: false },
    ]);
  });

  it("per-session: each store in the session's own folder under the state folder, one folder per mount path", () => {
    const folder = sessionStoresFolder('/var/state', 'sesn_1');
    expect(folder).toBe(`/var/state/${SESSION_STORES_FOLDER}/sesn_1`);
    const twice = [...resources, { memory_store_id: 'memstore_1', mount_path: '/mnt/memory/notes-again' }];
    const placed = placeStores(twice, '/w', folder);
    expect(placed.map((p) => p.mountPath)).toEqual(['/mnt/memory/notes', '/mnt/memory/policy', '/mnt/memory/notes-again']);
    for (const p of placed) expect(path.dirname(p.hostPath)).toBe(folder);
    expect(placed[0]!.hostPath).toMatch(/\/memstore_1-[0-9a-f]{8}$/);
    expect(new Set(placed.map((p) => p.hostPath)).size).toBe(3);
    // The same session and store always land in the same folder: a killed run's copy is found again.
    expect(placeStores(twice, '/w', folder)).toEqual(placed);
  });

  it.each([
    { description: 'a path separator', id: 'sesn/../../etc' },
    { description: 'dots only', id: '..' },
    { description: 'an over-long id', id: 'x'.repeat(200) },
  ])('names a folder by a hash, never by an id with $description', ({ id }) => {
    const folder = sessionStoresFolder('/var/state', id);
    expect(path.dirname(folder)).toBe(`/var/state/${SESSION_STORES_FOLDER}`);
    expect(path.basename(folder)).toMatch(/^h-[0-9a-f]{32}$/);
    const [p] = placeStores([{ memory_store_id: id, mount_path: '/mnt/memory/x' }], '/w', folder);
    expect(path.dirname(p!.hostPath)).toBe(folder);
    expect(path.basename(p!.hostPath)).toMatch(/^h-[0-9a-f]{32}-[0-9a-f]{8}$/);
  });

  it('refuses an unclean mount path with the usual error', () => {
    expect(() => placeStores([{ memory_store_id: 'm', mount_path: '/mnt/../etc' }], '/w', '/s')).toThrow(MemoryMountError);
  });
});

describe('sessionWithHostPaths', () => {
  it('gives the mounter each store at its host folder and leaves the other resources as they are', () => {
    const session = {
      id: 'sesn_1',
      resources: [
        { type: 'file', file_id: 'f' },
        { type: 'memory_store', ...resources[0] },
        { type: 'memory_store', ...resources[1] },
      ],
    } as unknown as BetaManagedAgentsSession;
    const placed = placeStores(resources, '/w', '/s/sesn_1');
    const out = sessionWithHostPaths(session, placed);
    expect(out.resources.map((r) => ('mount_path' in r ? r.mount_path : r.type))).toEqual([
      'file',
      placed[0]!.hostPath,
      placed[1]!.hostPath,
    ]);
    // The session itself is not changed.
    expect((session.resources[1] as { mount_path: string }).mount_path).toBe('/mnt/memory/notes');
  });
});

describe('assertMountPathsAllowed', () => {
  it('checks the path the agent sees, not the host folder', () => {
    const placed = placeStores(resources, '/w', '/var/state/session-stores/sesn_1');
    expect(() => assertMountPathsAllowed(placed, ['/mnt/memory'])).not.toThrow();
    expect(() => assertMountPathsAllowed(placed, ['/var/state'])).toThrow(
      /mount path \/mnt\/memory\/notes is outside the allowed mount roots/,
    );
    expect(() => assertMountPathsAllowed(placed, [])).not.toThrow();
  });
});

describe('placementFor', () => {
  const base = { customTools: false, resources, workdir: '/w', sessionWorkdir: '/w/sessions/sesn_1' };
  it.each([
    { description: 'sandboxed toolset, mount paths free', input: { ...base, sandbox: bwrap() }, want: 'per-session' },
    { description: 'no sandbox', input: { ...base, sandbox: { kind: 'none', chosen: true } as SandboxRuntime }, want: 'shared' },
    { description: 'no sandbox runtime at all', input: { ...base, sandbox: undefined }, want: 'shared' },
    { description: "the caller's tools (they run in the worker)", input: { ...base, customTools: true, sandbox: bwrap() }, want: 'shared' },
    {
      description: 'a mount path inside an extra read-write path (the mount point would be made on the host)',
      input: { ...base, sandbox: bwrap({ readWritePaths: ['/mnt'] }) },
      want: 'shared',
    },
    {
      description: 'a mount path inside a system folder',
      input: { ...base, resources: [{ memory_store_id: 'm', mount_path: '/usr/share/notes' }], sandbox: bwrap() },
      want: 'shared',
    },
    {
      description: "a store without mount_path inside the session's workdir (concurrency 1)",
      input: { ...base, resources: [{ memory_store_id: 'm', name: 'n' }], sessionWorkdir: '/w', sandbox: bwrap() },
      want: 'shared',
    },
    {
      description: 'an unclean mount path (the shared checks refuse it)',
      input: { ...base, resources: [{ memory_store_id: 'm', mount_path: '/a/../b' }], sandbox: bwrap() },
      want: 'shared',
    },
  ])('$description: $want', ({ input, want }) => {
    expect(placementFor(input)).toBe(want);
  });

  it('bindableAnywhere refuses /proc, not the tmpfs of /dev or /tmp', () => {
    expect(bindableAnywhere('/proc/self/x', [])).toBe(false);
    expect(bindableAnywhere('/dev/shm/x', [])).toBe(true);
    expect(bindableAnywhere('/tmp/x', [])).toBe(true);
    expect(bindableAnywhere('/mnt/memory/x', ['/mnt/memory/xy'])).toBe(true);
  });
});

describe('sweepEmptySessionFolders', () => {
  let tmp: string;
  beforeEach(async () => {
    tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-placement-'));
  });
  afterEach(async () => {
    await fsp.rm(tmp, { recursive: true, force: true });
  });

  it('removes old empty session folders, keeps fresh ones and any holding a copy', async () => {
    const parent = path.join(tmp, SESSION_STORES_FOLDER);
    for (const d of ['old-empty', 'fresh-empty', 'old-full/store']) await fsp.mkdir(path.join(parent, d), { recursive: true });
    const old = new Date(Date.now() - EMPTY_SESSION_FOLDER_AGE_MS - 60_000);
    for (const d of ['old-empty', 'old-full']) await fsp.utimes(path.join(parent, d), old, old);
    expect(await sweepEmptySessionFolders(tmp)).toBe(1);
    expect(fs.readdirSync(parent).sort()).toEqual(['fresh-empty', 'old-full']);
    expect(await sweepEmptySessionFolders(path.join(tmp, 'none'))).toBe(0);
  });
});
