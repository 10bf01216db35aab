/**
 * The memory of the bubblewrap sandboxes a process started, read from /proc at one moment: each
 * child of that process whose tree runs `bwrap` is one sandbox (its init, tool host and shells);
 * other children (a compiler's service process) are not counted.
 */
import * as fsp from 'node:fs/promises';

/** PSS and RSS of every sandbox's processes below `workerPid`. */
export async function sandboxMemory(
  workerPid: number,
): Promise<{ sandboxes: number; pssKiB: number; rssKiB: number; privateKiB: number; pssKiBByName: Record<string, number> }> {
  const parentOf = new Map<number, number>();
  const nameOf = new Map<number, string>();
  for (const entry of await fsp.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await fsp.readFile(`/proc/${entry}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      nameOf.set(Number(entry), stat.slice(stat.indexOf('(') + 1, close));
      parentOf.set(Number(entry), Number(stat.slice(close + 2).split(' ')[1]));
    } catch {
      // Gone meanwhile.
    }
  }
  // Each child of the worker whose tree runs bubblewrap is one sandbox (others, e.g. a compiler's
  // service process, are not counted).
  const childrenOf = new Map<number, number[]>();
  for (const [pid, ppid] of parentOf) childrenOf.set(ppid, [...(childrenOf.get(ppid) ?? []), pid]);
  const treeOf = (root: number): number[] => {
    const tree = [root];
    for (let i = 0; i < tree.length; i++) tree.push(...(childrenOf.get(tree[i]!) ?? []));
    return tree;
  };
  const trees = (childrenOf.get(workerPid) ?? []).map(treeOf).filter((t) => t.some((pid) => nameOf.get(pid) === 'bwrap'));
  const sandboxes = trees.length;
  const descendants = trees.flat();
  let pssKiB = 0;
  let rssKiB = 0;
  let privateKiB = 0;
  const pssKiBByName: Record<string, number> = {};
  for (const pid of descendants) {
    try {
      const rollup = await fsp.readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
      const pss = Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0);
      pssKiB += pss;
      rssKiB += Number(/^Rss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0);
      privateKiB +=
        Number(/^Private_Clean:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) + Number(/^Private_Dirty:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0);
      const name = nameOf.get(pid) ?? '?';
      pssKiBByName[name] = (pssKiBByName[name] ?? 0) + pss;
    } catch {
      // Gone meanwhile.
    }
  }
  return { sandboxes, pssKiB, rssKiB, privateKiB, pssKiBByName };
}
