import { constants as fsc } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { MemoryMountError, coerceError } from '../../errors.js';
import { API_LIMITS } from '../../internal/defaults.js';
import type { FoundAtPath } from '../rules/adopt.js';
import type { JournalEntry } from '../journal/journal.js';
import { LocalDir } from '../disk/local-dir.js';
import { MARKER_FILE_NAME, markerVerdict } from '../rules/marker.js';
import { findParentSymlink } from './mount-path-guard.js';
import type { MemoryAccess } from '../rules/types.js';

/**
 * The host checks of a mount, before anything is created: the session's stores (at most 8, one
 * folder each, none inside another), each parent folder (exists, is a folder, writable), and what
 * is at each mount path already. Also the two first touches of the disk: creating the store's own
 * folder, and probing whether the filesystem folds letter case.
 */

/** Most memory stores one session may attach. */
export const MAX_STORES_PER_SESSION = API_LIMITS.storesPerSession;

export interface StoreSpec {
  storeId: string;
  name: string;
  access: MemoryAccess;
  root: string;
  /** The journal entry of a leftover this mount takes over, when there is one. */
  adopt?: JournalEntry;
}

export function validateSpecs(sessionId: string, specs: StoreSpec[]): void {
  if (specs.length > MAX_STORES_PER_SESSION) {
    const ids = specs.map((s) => s.storeId).join(', ');
    const beyond = specs
      .slice(MAX_STORES_PER_SESSION)
      .map((s) => `${s.storeId} at ${s.root}`)
      .join(', ');
    throw new MemoryMountError(
      `session ${sessionId} attaches ${specs.length} memory stores (${ids}); at most ${MAX_STORES_PER_SESSION} can be mounted ` +
        `per session (beyond the limit: ${beyond}). Detach ${specs.length - MAX_STORES_PER_SESSION} of them from the session.`,
      { storeId: specs[MAX_STORES_PER_SESSION]?.storeId, path: specs[MAX_STORES_PER_SESSION]?.root },
    );
  }
  for (let i = 0; i < specs.length; i++) {
    for (let j = 0; j < i; j++) {
      const a = specs[j]!;
      const b = specs[i]!;
      const nested = b.root.startsWith(`${a.root}/`) ? [b, a] : a.root.startsWith(`${b.root}/`) ? [a, b] : undefined;
      if (a.root === b.root) {
        throw new MemoryMountError(
          `memory stores ${a.storeId} (${a.name}) and ${b.storeId} (${b.name}) are both attached at ${b.root}; one folder holds ` +
            'one store. Attach one of them under another name so it gets its own mount_path.',
          { storeId: b.storeId, path: b.root },
        );
      }
      if (nested) {
        const [inner, outer] = nested as [StoreSpec, StoreSpec];
        throw new MemoryMountError(
          `memory store ${inner.storeId} (${inner.name}) would be mounted at ${inner.root}, inside the folder of store ` +
            `${outer.storeId} (${outer.name}) at ${outer.root}; its files would be synced into the other store. ` +
            'Attach the stores at sibling mount paths.',
          { storeId: inner.storeId, path: inner.root },
        );
      }
    }
  }
}

/**
 * The parent folder must exist, be a folder and be writable: the worker never creates it. No folder
 * of its existing chain may be a symlink: whoever could change the link would choose where the
 * worker writes.
 */
export async function checkParent(spec: StoreSpec): Promise<void> {
  const parent = path.dirname(spec.root);
  const who = `memory store ${spec.storeId} (${spec.name})`;
  const user = currentUser();
  const link = await findParentSymlink(spec.root);
  if (link !== undefined) {
    throw new MemoryMountError(
      `${who}: the mount path ${spec.root} goes through the symlink ${link.link} (-> ${link.target}); the worker never ` +
        `mounts through a symlinked folder, since whoever can change the link chooses where it writes. Replace ${link.link} ` +
        'with a real folder (or bind-mount the target there), or attach the store at a path without symlinks.',
      { storeId: spec.storeId, path: spec.root },
    );
  }
  const outer = await findEnclosingStore(spec.root);
  if (outer !== undefined) {
    throw new MemoryMountError(
      `${who}: the mount path ${spec.root} is inside ${outer}, the folder of another memory store (it holds the ` +
        `${MARKER_FILE_NAME} marker), mounted by another worker or left by one; that store's agent would read this ` +
        `store's files and its sync would upload them. Attach the store at a mount_path outside ${outer}.`,
      { storeId: spec.storeId, path: spec.root },
    );
  }
  const parentStat = await fsp.stat(parent).catch((e: unknown) => e as NodeJS.ErrnoException);
  if (parentStat instanceof Error) {
    throw new MemoryMountError(
      `${who}: the parent folder ${parent} of ${spec.root} does not exist (${parentStat.code ?? parentStat.message}); the worker creates ` +
        `only each store's own folder, never its parent. Prepare the host: mkdir -p ${parent} && chown ${user} ${parent}`,
      { storeId: spec.storeId, path: spec.root },
    );
  }
  if (!parentStat.isDirectory()) {
    throw new MemoryMountError(
      `${who}: the parent ${parent} of ${spec.root} is not a folder. Replace it with a folder writable by ${user}: ` +
        `mkdir -p ${parent} && chown ${user} ${parent}`,
      { storeId: spec.storeId, path: spec.root },
    );
  }
  try {
    await fsp.access(parent, fsc.W_OK | fsc.X_OK);
  } catch {
    throw new MemoryMountError(
      `${who}: the parent folder ${parent} of ${spec.root} is not writable by this process (user ${user}); the worker must ` +
        `create ${spec.root} in it. Prepare the host: chown ${user} ${parent} (or chmod u+wx ${parent})`,
      { storeId: spec.storeId, path: spec.root },
    );
  }
}

/**
 * The nearest existing folder above `root` that holds a store marker, or undefined. The worker's
 * own path locks keep the stores of one process apart; this keeps a store out of a store another
 * process (a second worker, a `handle` beside it) has mounted.
 */
async function findEnclosingStore(root: string): Promise<string | undefined> {
  for (let dir = path.dirname(root); ; dir = path.dirname(dir)) {
    const st = await fsp.lstat(path.join(dir, MARKER_FILE_NAME)).catch(() => undefined);
    if (st !== undefined) return dir;
    if (path.dirname(dir) === dir) return undefined;
  }
}

/** What is at a mount path now: nothing, a symlink, a file, or a folder and its marker read against `storeId`. */
export async function inspectPath(root: string, storeId: string): Promise<FoundAtPath> {
  const st = await fsp.lstat(root).catch(() => undefined);
  if (st === undefined) return { kind: 'nothing' };
  if (st.isSymbolicLink()) return { kind: 'symlink' };
  if (!st.isDirectory()) return { kind: 'file' };
  const dir = new LocalDir(root);
  const bytes = await dir.readMarker().catch(() => undefined);
  if (bytes === undefined) return { kind: 'folder', marker: { kind: 'missing' }, empty: await dir.isEmpty().catch(() => false) };
  return { kind: 'folder', marker: markerVerdict({ kind: 'bytes', bytes }, storeId) };
}

function alreadyExists(spec: StoreSpec, what: string): MemoryMountError {
  return new MemoryMountError(
    `memory store ${spec.storeId} (${spec.name}): ${spec.root} already exists (${what}); the worker never mounts over ` +
      'existing data. Remove it (after saving anything you need) or attach the store at another mount_path.',
    { storeId: spec.storeId, path: spec.root },
  );
}

export async function createRoot(spec: StoreSpec): Promise<void> {
  try {
    await fsp.mkdir(spec.root, { mode: 0o755 });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') throw alreadyExists(spec, 'created meanwhile by someone else');
    throw new MemoryMountError(
      `memory store ${spec.storeId} (${spec.name}): could not create ${spec.root} (${code ?? coerceError(e).message}). ` +
        `Make its parent a folder writable by ${currentUser()}: mkdir -p ${path.dirname(spec.root)} && chown ${currentUser()} ${path.dirname(spec.root)}`,
      { storeId: spec.storeId, path: spec.root },
      { cause: e },
    );
  }
}

/** Create a lower-case probe file and look for its upper-case spelling. */
export async function probeCaseInsensitive(root: string): Promise<boolean> {
  const name = `.maw-tmp-case-probe-${Math.random().toString(36).slice(2, 10)}`;
  const probe = path.join(root, name);
  const fh = await fsp.open(probe, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW, 0o600);
  await fh.close();
  try {
    await fsp.lstat(path.join(root, name.toUpperCase()));
    return true;
  } catch {
    return false;
  } finally {
    await fsp.unlink(probe).catch(() => {});
  }
}

export function currentUser(): string {
  try {
    return os.userInfo().username;
  } catch {
    return String(process.getuid?.() ?? '<worker user>');
  }
}
