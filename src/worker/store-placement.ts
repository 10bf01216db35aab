import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';
import { MemoryMountError } from '../errors.js';
import { isInsideAllowedRoots, normalizeAllowedRoots } from '../memory/mount/mount-path-guard.js';
import { storeRoot, type StoreRootInput } from '../memory/mount/store-root.js';
import { sessionSandboxOf, type SandboxRuntime } from '../sandbox/runtime.js';

/**
 * Where a session's store folders live on the host.
 *
 * - `'shared'`: at the store's `mount_path` itself, the one folder every session of this host sees
 *   there. Two sessions of one store need the same folder, so the second waits for the first
 *   (the per-path locks). This is the rule whenever the tools run in the worker process (no
 *   sandbox, or the caller's own tools): they see the host's one filesystem.
 * - `'per-session'`: when the session's agent toolset runs in a sandbox of its own, each store's
 *   folder is a copy of that session's own, at
 *   `<stateDir>/session-stores/<session id>/<store id>-<hash of mount_path>`, bound at `mount_path`
 *   inside the sandbox (read-only for a read-only store). The agent sees the paths it would see
 *   with the shared rule; two sessions of one store each hold a copy and sync it by the store-wins
 *   rules that hold between two hosts, so neither waits. Under the state folder because: the
 *   worker owns it (`0700`, never bound into a sandbox whole, never a path an agent names), so no
 *   agent or other session can reach a copy but through its own bind; it is on the filesystem of
 *   the content cache, whose files a mount copies; the journal that names each folder lives there
 *   too, so `recover` and the next mount find a copy left by a killed worker at the same place
 *   (the path depends only on the session and the store); and its paths stay short and free of
 *   anything the server chose but ids, which are used only when they are plain.
 */
export type StorePlacementMode = 'shared' | 'per-session';

/** One store of a session: where the agent sees it, and where its folder is on the host. */
export interface StorePlacement {
  storeId: string;
  /** The path the agent uses (the store's `mount_path`, or the derived one). */
  mountPath: string;
  /** The folder on the host the worker syncs (equal to `mountPath` when shared). */
  hostPath: string;
  readOnly: boolean;
}

/** The folder under the state folder that holds every per-session store folder. */
export const SESSION_STORES_FOLDER = 'session-stores';

/** `id` when it is a plain id (letters, digits, `_`, `-`), else a hash of it: never a path the server chose. */
function safeSegment(id: string): string {
  return /^[A-Za-z0-9_-]{1,96}$/.test(id) ? id : `h-${createHash('sha256').update(id).digest('hex').slice(0, 32)}`;
}

/** The folder holding the per-session store folders of `sessionId`. */
export function sessionStoresFolder(stateDir: string, sessionId: string): string {
  return path.join(path.resolve(stateDir), SESSION_STORES_FOLDER, safeSegment(sessionId));
}

/**
 * Where each store of a session goes. `sessionFolder` undefined: shared (host path = mount path);
 * else each store gets a folder of its own in it, named by its id and its mount path (so the same
 * store attached twice gets two folders). Throws a {@link MemoryMountError} for a mount path that
 * is not clean.
 */
export function placeStores(
  resources: ReadonlyArray<StoreRootInput & { access?: string | null | undefined }>,
  workdir: string,
  sessionFolder: string | undefined,
): StorePlacement[] {
  return resources.map((r) => {
    const mountPath = storeRoot(r, workdir);
    const hostPath =
      sessionFolder === undefined
        ? mountPath
        : path.join(sessionFolder, `${safeSegment(r.memory_store_id)}-${createHash('sha256').update(mountPath).digest('hex').slice(0, 8)}`);
    return { storeId: r.memory_store_id, mountPath, hostPath, readOnly: r.access === 'read_only' };
  });
}

/**
 * The session as the mounter is to see it: each store resource's `mount_path` replaced by its host
 * folder (resources matched by order, the order {@link placeStores} keeps).
 */
export function sessionWithHostPaths(session: BetaManagedAgentsSession, placements: readonly StorePlacement[]): BetaManagedAgentsSession {
  let i = 0;
  const resources = session.resources.map((r) => {
    if (r.type !== 'memory_store') return r;
    const placement = placements[i++];
    return placement === undefined ? r : { ...r, mount_path: placement.hostPath };
  });
  return { ...session, resources };
}

/**
 * The allowed mount roots apply to the path the agent sees: checked here for per-session stores
 * (the mounter checks the host folders, which lie in the session's folder).
 */
export function assertMountPathsAllowed(placements: readonly StorePlacement[], allowedMountRoots: readonly string[]): void {
  const roots = normalizeAllowedRoots(allowedMountRoots);
  for (const p of placements) {
    if (isInsideAllowedRoots(p.mountPath, roots)) continue;
    throw new MemoryMountError(
      `memory store ${p.storeId}: mount path ${p.mountPath} is outside the allowed mount roots (${roots.join(', ')}); ` +
        `nothing was created. Attach the store at a mount_path inside one of them, or add its parent to allowedMountRoots ` +
        `(--allowed-mount-root ${path.dirname(p.mountPath)}).`,
      { storeId: p.storeId, path: p.mountPath },
    );
  }
}

/**
 * True when `mountPath` can be bound in a sandbox at a path the host does not hold: not inside any
 * path the sandbox binds from the host (`bound`: system folders, the runtime, the operator's extra
 * paths, the session's workdir), where the mount point would have to exist on the host (or be
 * created there, through a read-write bind), nor in `/proc` (its own procfs, where nothing can be
 * made). The sandbox's `/dev` and `/tmp` are tmpfs of its own: a mount path there is fine. A
 * session with a mount path that fails this keeps the shared rule.
 */
export function bindableAnywhere(mountPath: string, bound: readonly string[]): boolean {
  const inside = (root: string): boolean => mountPath === root || mountPath.startsWith(root === '/' ? '/' : `${root}/`);
  return ![...bound, '/proc'].some(inside);
}

/**
 * Create the session's folder (and the state folder's `session-stores`), each `0700`, and return
 * its real spelling: the mounter refuses a parent chain holding a symlink, and a state folder
 * reached through one (`/home` a link) is still the worker's own.
 */
export async function createSessionStoresFolder(folder: string): Promise<string> {
  await fsp.mkdir(path.dirname(folder), { recursive: true, mode: 0o700 });
  await fsp.mkdir(folder, { recursive: true, mode: 0o700 });
  return fsp.realpath(folder);
}

/** Remove the session's folder when its stores left it empty (a store left for `recover` keeps it). */
export async function removeSessionStoresFolder(folder: string): Promise<void> {
  await fsp.rmdir(folder).catch(() => {});
}

/**
 * The placement of a session's stores: per-session when its agent toolset runs in a bubblewrap
 * sandbox (no tools of the caller's: those run in the worker and see the host's paths) and every
 * mount path can be bound there ({@link bindableAnywhere}); else shared.
 */
export function placementFor(input: {
  customTools: boolean;
  sandbox: SandboxRuntime | undefined;
  resources: readonly StoreRootInput[];
  workdir: string;
  sessionWorkdir: string;
}): StorePlacementMode {
  const sandbox = sessionSandboxOf(input.sandbox, input.customTools);
  if (sandbox === undefined) return 'shared';
  const bound = [
    ...sandbox.layout.system.map((s) => s.path),
    ...sandbox.layout.readOnly,
    ...sandbox.options.readOnlyPaths,
    ...sandbox.options.readWritePaths,
    path.resolve(input.sessionWorkdir),
  ];
  let mountPaths: string[];
  try {
    mountPaths = input.resources.map((r) => storeRoot(r, input.workdir));
  } catch {
    // An unclean mount path: the shared path's checks refuse it with the full message.
    return 'shared';
  }
  return mountPaths.every((p) => bindableAnywhere(p, bound)) ? 'per-session' : 'shared';
}

/** How old an empty session folder must be before the start-up sweep removes it (another worker sharing the state folder may have just made it). */
export const EMPTY_SESSION_FOLDER_AGE_MS = 10 * 60_000;

/**
 * Remove the session folders a killed worker left empty (their stores adopted by a later run, or
 * recovered), once unchanged for {@link EMPTY_SESSION_FOLDER_AGE_MS}. A folder holding anything
 * is kept: its copies wait for the journal's adoption or `recover`. Returns how many went.
 */
export async function sweepEmptySessionFolders(stateDir: string, nowMs: number = Date.now()): Promise<number> {
  const parent = path.join(path.resolve(stateDir), SESSION_STORES_FOLDER);
  const names = await fsp.readdir(parent).catch(() => [] as string[]);
  let removed = 0;
  for (const name of names) {
    const folder = path.join(parent, name);
    const st = await fsp.lstat(folder).catch(() => undefined);
    if (st === undefined || !st.isDirectory() || nowMs - st.mtimeMs < EMPTY_SESSION_FOLDER_AGE_MS) continue;
    // rmdir removes only an empty folder.
    if (
      await fsp.rmdir(folder).then(
        () => true,
        () => false,
      )
    )
      removed++;
  }
  return removed;
}
