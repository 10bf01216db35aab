import fs from 'node:fs';

/** What {@link scrubProcEnviron} did. */
export type EnvironScrub =
  | { status: 'scrubbed'; entries: number }
  | { status: 'nothing_to_scrub' }
  | { status: 'unsupported'; reason: string }
  | { status: 'failed'; reason: string };

/**
 * Overwrite with NUL bytes the `ANTHROPIC_*` entries of this process's initial environment block,
 * the memory `/proc/<pid>/environ` shows. Removing a variable from `process.env` does not touch
 * that block, so without this any process of the same user (the agent's bash reading
 * `/proc/$PPID/environ`) could still read a credential passed as a variable. Call it only after
 * the variables were removed from `process.env`: nothing points into those bytes then.
 * Linux only; elsewhere, or when `/proc/self/mem` cannot be written, the block stays as it is and
 * the result says why.
 */
export function scrubProcEnviron(isSecret: (name: string) => boolean): EnvironScrub {
  if (process.platform !== 'linux') return { status: 'unsupported', reason: `no /proc/self/environ on ${process.platform}` };
  try {
    const start = environStart();
    if (start === undefined) return { status: 'failed', reason: 'env_start missing from /proc/self/stat' };
    const block = fs.readFileSync('/proc/self/environ');
    const targets = secretEntries(block, isSecret);
    if (targets.length === 0) return { status: 'nothing_to_scrub' };
    const fd = fs.openSync('/proc/self/mem', 'r+');
    try {
      for (const { offset, length } of targets) fs.writeSync(fd, Buffer.alloc(length), 0, length, start + offset);
    } finally {
      fs.closeSync(fd);
    }
    const left = secretEntries(fs.readFileSync('/proc/self/environ'), isSecret).length;
    if (left > 0) return { status: 'failed', reason: `${left} entries still readable after the overwrite` };
    return { status: 'scrubbed', entries: targets.length };
  } catch (e) {
    return { status: 'failed', reason: e instanceof Error ? ((e as NodeJS.ErrnoException).code ?? e.message) : String(e) };
  }
}

/** Address of the environment block: field 50 (`env_start`) of `/proc/self/stat`; undefined when it is missing. */
function environStart(): number | undefined {
  const stat = fs.readFileSync('/proc/self/stat', 'utf8');
  // Fields from the third on follow the command name, which is in parentheses and may hold spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const start = Number(fields[50 - 3]);
  return Number.isSafeInteger(start) && start > 0 ? start : undefined;
}

/** Offset and length of every `NAME=value` entry of `block` whose name `isSecret` picks. */
function secretEntries(block: Buffer, isSecret: (name: string) => boolean): Array<{ offset: number; length: number }> {
  const found: Array<{ offset: number; length: number }> = [];
  let offset = 0;
  while (offset < block.length) {
    let end = block.indexOf(0, offset);
    if (end === -1) end = block.length;
    const entry = block.subarray(offset, end).toString('latin1');
    const eq = entry.indexOf('=');
    if (eq > 0 && isSecret(entry.slice(0, eq))) found.push({ offset, length: end - offset });
    offset = end + 1;
  }
  return found;
}
