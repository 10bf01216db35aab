import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

/** The prefix of a session's egress folder in the temporary folder. */
export const EGRESS_DIR_PREFIX = 'maw-egress-';

/** Folders younger than this are left alone: their proxy may still be starting. */
const STALE_AFTER_MS = 60_000;

/**
 * Remove the egress folders a killed worker left behind: those of this user, older than a minute,
 * whose socket no proxy answers on (a worker still running answers, and keeps its folder). Never
 * throws; returns the folders removed.
 */
export async function pruneStaleEgressDirs(opts: { parent?: string; nowMs?: number } = {}): Promise<string[]> {
  const parent = opts.parent ?? os.tmpdir();
  const now = opts.nowMs ?? Date.now();
  const removed: string[] = [];
  let names: string[];
  try {
    names = (await fsp.readdir(parent)).filter((n) => n.startsWith(EGRESS_DIR_PREFIX));
  } catch {
    return removed;
  }
  for (const name of names) {
    const dir = path.join(parent, name);
    try {
      const st = await fsp.lstat(dir);
      if (!st.isDirectory() || st.uid !== process.getuid?.() || now - st.mtimeMs < STALE_AFTER_MS) continue;
      if (await answers(path.join(dir, 'proxy.sock'))) continue;
      await fsp.rm(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      // Gone already, or not ours to remove.
    }
  }
  return removed;
}

function answers(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(socketPath);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
