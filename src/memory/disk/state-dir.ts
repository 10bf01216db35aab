import { constants as fsc } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError } from '../../errors.js';

/**
 * The state folder: where the journal, conflict copies and unsaved copies live, outside every
 * mount. It is per user (never a shared temp folder), created `0700`, and nothing in it is ever
 * written through a symlink: every folder on the way down from the state folder is `lstat`ed and
 * must be a real folder, and files are created with `O_CREAT | O_EXCL | O_NOFOLLOW`.
 */

/** `$XDG_STATE_HOME/managed-agents-worker`, else `~/.local/state/managed-agents-worker`. */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env['XDG_STATE_HOME'];
  if (xdg !== undefined && path.isAbsolute(xdg)) return path.join(xdg, 'managed-agents-worker');
  return path.join(os.homedir(), '.local', 'state', 'managed-agents-worker');
}

/** Flags of every file created in the state folder: a new file, never through a symlink. */
export const STATE_FILE_FLAGS = fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW;

function stateDirError(dir: string, problem: string): ConfigError {
  return new ConfigError(
    `state folder ${dir} ${problem}; the worker keeps its journal and copies of unsaved files there and never writes ` +
      'through a symlink. Point stateDir (--state-dir) at a real folder owned by this user, or remove the entry.',
    [`stateDir: expected a real folder, got ${dir} (${problem})`],
  );
}

/**
 * Create the state folder (`0700`; missing parents are created too) and check it is a real folder,
 * not a symlink. Returns its absolute path.
 */
export async function ensureStateDir(dir: string): Promise<string> {
  const abs = path.resolve(dir);
  await fsp.mkdir(path.dirname(abs), { recursive: true, mode: 0o700 });
  await makeRealFolder(abs);
  return abs;
}

/** Create one folder (`0700`) unless it exists, then refuse it if it is a symlink or not a folder. */
async function makeRealFolder(abs: string): Promise<void> {
  try {
    await fsp.mkdir(abs, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  const st = await fsp.lstat(abs);
  if (st.isSymbolicLink()) throw stateDirError(abs, 'is a symlink');
  if (!st.isDirectory()) throw stateDirError(abs, 'is not a folder');
}

/**
 * Create `segments` one by one below the (checked) state folder `base`, each `0700`, refusing any
 * that exists as a symlink or a non-folder. Returns the absolute path of the last one.
 */
export async function ensureStateSubdir(base: string, segments: readonly string[]): Promise<string> {
  let abs = await ensureStateDir(base);
  for (const seg of segments) {
    if (seg === '' || seg === '.' || seg === '..' || seg.includes('/') || seg.includes('\0')) {
      throw stateDirError(path.join(abs, seg), 'would leave the state folder');
    }
    abs = path.join(abs, seg);
    await makeRealFolder(abs);
  }
  return abs;
}

/** A state-folder segment made of safe characters only (store ids, stamps). */
export function safeSegment(s: string): string {
  const cleaned = s.replace(/[^A-Za-z0-9_.-]/g, '_');
  return cleaned === '' || cleaned === '.' || cleaned === '..' ? '_' : cleaned;
}

/**
 * Write `text` to `file` atomically: a fresh temp file beside it (never through a symlink),
 * fsynced, renamed over `file`, then the folder fsynced so the rename survives a power cut.
 */
export async function writeFileDurable(file: string, text: string): Promise<void> {
  const dir = path.dirname(file);
  const tmp = path.join(dir, `.tmp-${process.pid}-${Math.random().toString(36).slice(2, 10)}`);
  const fh = await fsp.open(tmp, STATE_FILE_FLAGS, 0o600);
  let renamed = false;
  try {
    await fh.writeFile(text, 'utf8');
    await fh.sync();
    await fh.close();
    await fsp.rename(tmp, file);
    renamed = true;
  } finally {
    await fh.close().catch(() => {});
    if (!renamed) await fsp.unlink(tmp).catch(() => {});
  }
  await syncDir(dir);
}

/** fsync a folder (makes a rename or unlink in it durable). */
export async function syncDir(dir: string): Promise<void> {
  const fh = await fsp.open(dir, fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
