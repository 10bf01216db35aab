import * as fs from 'node:fs';
import * as path from 'node:path';
import { ConfigError } from '../errors.js';

/**
 * The state folder (journal, content cache, conflict and unsaved copies) must lie outside every
 * folder an agent can write to. The sandbox hides it when it lies inside a bound folder, but only
 * by mounting over its path: the agent can still rename a folder above it (`mv ~/.local ~/x`) and
 * put a folder of its own at the path. The worker would then read a journal the agent wrote
 * (whose entries name folders to remove) and write every later session's copies and the cached
 * contents of every store where the agent finds them. So a workdir holding the state folder, and a
 * workdir or store folder inside it, are refused.
 */

/**
 * `p` absolute with its existing part's symlinks resolved, so two spellings of one folder compare
 * equal (`/srv/w` a link to `/home/w`).
 */
function realSpelling(p: string): string {
  const abs = path.resolve(p);
  const rest: string[] = [];
  let cur = abs;
  for (;;) {
    try {
      return path.join(fs.realpathSync(cur), ...rest.reverse());
    } catch {
      const parent = path.dirname(cur);
      if (parent === cur) return abs;
      rest.push(path.basename(cur));
      cur = parent;
    }
  }
}

function inside(root: string, p: string): boolean {
  return p === root || p.startsWith(root === '/' ? '/' : `${root}/`);
}

/** How `folder` and the state folder overlap, or undefined when they do not. */
export function stateDirOverlap(stateDir: string, folder: string): 'state-inside' | 'folder-inside' | undefined {
  const state = realSpelling(stateDir);
  const f = realSpelling(folder);
  if (inside(f, state)) return 'state-inside';
  if (inside(state, f)) return 'folder-inside';
  return undefined;
}

/**
 * Throws a {@link ConfigError} when the workdir holds the state folder or lies inside it, or when
 * one of the sandbox's read-write folders (as writable to the agent as its workdir) holds it.
 */
export function assertStateDirOutsideWorkdir(stateDir: string, workdir: string, readWritePaths: readonly string[] = []): void {
  const overlap = stateDirOverlap(stateDir, workdir);
  if (overlap !== undefined) {
    const how =
      overlap === 'state-inside'
        ? `the state folder ${stateDir} is inside the workdir ${workdir}`
        : `the workdir ${workdir} is inside the state folder ${stateDir}`;
    throw new ConfigError(
      `${how}: the agent writes in the workdir, and could swap the state folder (journal, content cache, copies of ` +
        'unsaved files) for one of its own. Give the worker a workdir of its own that holds no state folder ' +
        '(workdir / --workdir, e.g. /var/lib/managed-agents-worker/work), or point stateDir (--state-dir, XDG_STATE_HOME) outside it.',
      [`workdir: ${how}`],
    );
  }
  for (const rw of readWritePaths) {
    if (stateDirOverlap(stateDir, rw) === undefined) continue;
    const how = `the sandbox's read-write path ${rw} and the state folder ${stateDir} overlap`;
    throw new ConfigError(
      `${how}: every agent may write there, and could swap the state folder for one of its own. Drop ${rw} from ` +
        'readWritePaths (--sandbox-rw), or point stateDir (--state-dir, XDG_STATE_HOME) outside it.',
      [`sandbox: ${how}`],
    );
  }
}
