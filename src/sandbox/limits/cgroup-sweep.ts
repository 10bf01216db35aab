/**
 * The cgroups a worker leaves behind: the session cgroups of a worker that is gone (killed and
 * removed at the next start and in `recover`), and a stopped worker's own `maw-<key>` parents. The
 * layout is described in `cgroup-host.ts`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { processAlive } from '../../internal/process-alive.js';
import { cgroupParentName, CONTROLLERS, DEFAULT_ROOT, type CgroupHostFacts, type CgroupSupport } from './cgroup-host.js';
import { killAndRemove } from './session-cgroup.js';

/**
 * Kill and remove the session cgroups of workers that are gone (their `<pid>` names no live
 * process) under every `maw-<key>` folder of this state folder anywhere in the hierarchy (the
 * worker that left them may have run in another cgroup than this process). Returns the folders
 * removed. Never throws; a cgroup that does not empty in time is left for the next sweep.
 */
export async function sweepSandboxCgroups(
  stateDir: string,
  facts: Pick<CgroupHostFacts, 'root' | 'pid'> & { alive?: (pid: number) => boolean } = {},
): Promise<string[]> {
  const root = facts.root ?? DEFAULT_ROOT;
  const self = facts.pid ?? process.pid;
  const alive = facts.alive ?? processAlive;
  const name = cgroupParentName(stateDir);
  const v2 = fs.existsSync(path.join(root, 'cgroup.controllers'));
  const tops = v2 ? [root] : CONTROLLERS.map((c) => path.join(root, c)).filter((d) => fs.existsSync(d));
  const leftovers = new Map<string, string[]>();
  for (const top of tops) {
    for (const parent of await findNamed(top, name)) {
      for (const entry of safeReaddir(parent)) {
        if (!entry.isDirectory()) continue;
        const owner = /^(\d+)-/.exec(entry.name);
        if (!owner) continue;
        const pid = Number(owner[1]);
        if (pid === self || alive(pid)) continue;
        const key = `${pid}\0${entry.name}`;
        leftovers.set(key, [...(leftovers.get(key) ?? []), path.join(parent, entry.name)]);
      }
    }
  }
  const removed: string[] = [];
  for (const dirs of leftovers.values()) {
    if (await killAndRemove(dirs, v2 ? 'v2' : 'v1')) removed.push(...dirs);
  }
  return removed;
}

/**
 * Remove the worker's `maw-<key>` parents once it has stopped and its sessions' cgroups are gone:
 * a parent that still holds a session's cgroup (the kernel refuses to remove it) is left, as is
 * anything the setup changed in the worker's own cgroup. Returns the folders removed; never throws.
 */
export function releaseSandboxCgroups(support: CgroupSupport): string[] {
  if (support.kind === 'none') return [];
  const removed: string[] = [];
  for (const parent of new Set(Object.values(support.parents))) {
    try {
      fs.rmdirSync(parent);
      removed.push(parent);
    } catch (e) {
      // A cgroupfs answers EBUSY for a cgroup with children; a plain folder standing in for one (a
      // test's) is empty but for its control files once it has no child folder.
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' || safeReaddir(parent).some((d) => d.isDirectory())) continue;
      try {
        fs.rmSync(parent, { recursive: true, force: true });
        removed.push(parent);
      } catch {
        // Left as it is.
      }
    }
  }
  return removed;
}

/**
 * Folders named `name` under `top`, searched breadth-first to a bounded depth and count. The
 * folders of one level are read at once, without blocking the event loop: a host's hierarchy can
 * hold thousands of cgroups, and a synchronous walk of them would hold up the worker's start.
 */
async function findNamed(top: string, name: string): Promise<string[]> {
  const found: string[] = [];
  let level = [top];
  let visited = 0;
  for (let depth = 0; depth < 8 && level.length > 0 && visited < MAX_WALKED_FOLDERS; depth++) {
    const next: string[] = [];
    for (let i = 0; i < level.length; i += READS_AT_ONCE) {
      const listings = await Promise.all(level.slice(i, i + READS_AT_ONCE).map((dir) => readdirOrEmpty(dir)));
      listings.forEach((entries, k) => {
        const dir = level[i + k]!;
        for (const entry of entries) {
          if (!entry.isDirectory()) continue;
          visited++;
          const child = path.join(dir, entry.name);
          if (entry.name === name) found.push(child);
          else next.push(child);
        }
      });
    }
    level = next;
  }
  return found;
}

/** Most folders one sweep looks at, and how many of them it reads at a time. */
const MAX_WALKED_FOLDERS = 20_000;
const READS_AT_ONCE = 32;

async function readdirOrEmpty(dir: string): Promise<fs.Dirent[]> {
  try {
    return await fs.promises.readdir(dir, { withFileTypes: true });
  } catch {
    return [];
  }
}

function safeReaddir(dir: string): fs.Dirent[] {
  try {
    return fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
}
