/**
 * Reads the keys of one JSON log line as written, duplicates included (JSON.parse keeps only the
 * last of two equal keys, so a line with two `pid`s would look fine once parsed).
 */

/**
 * Every key of every object in `raw`, with the dotted path of the object holding it ('' for the
 * top) and a number telling objects apart (two objects in one array share a path).
 */
export function jsonKeys(raw: string): Array<{ path: string; key: string; object: number }> {
  const out: Array<{ path: string; key: string; object: number }> = [];
  // One frame per open object or array: the object's path and its key waiting for a value.
  const stack: Array<{ kind: 'object' | 'array'; path: string; pendingKey: string | undefined; object: number }> = [];
  let objects = 0;
  let i = 0;
  while (i < raw.length) {
    const c = raw[i]!;
    if (c === '"') {
      const end = stringEnd(raw, i);
      const text = JSON.parse(raw.slice(i, end + 1)) as string;
      const top = stack.at(-1);
      let j = end + 1;
      while (raw[j] === ' ') j++;
      if (top?.kind === 'object' && raw[j] === ':') {
        out.push({ path: top.path, key: text, object: top.object });
        top.pendingKey = text;
      }
      i = end + 1;
      continue;
    }
    if (c === '{' || c === '[') {
      const top = stack.at(-1);
      const name = top?.kind === 'object' ? (top.pendingKey ?? '') : '[]';
      const path = top === undefined ? '' : top.path === '' ? name : `${top.path}.${name}`;
      stack.push({ kind: c === '{' ? 'object' : 'array', path, pendingKey: undefined, object: objects++ });
    } else if (c === '}' || c === ']') {
      stack.pop();
    }
    i++;
  }
  return out;
}

function stringEnd(raw: string, start: number): number {
  let i = start + 1;
  while (i < raw.length) {
    if (raw[i] === '\\') i += 2;
    else if (raw[i] === '"') return i;
    else i++;
  }
  throw new Error(`unterminated string in ${raw}`);
}

/** Keys that appear twice in one object of the line. */
export function duplicateKeys(raw: string): string[] {
  const seen = new Set<string>();
  const dups: string[] = [];
  for (const { path, key, object } of jsonKeys(raw)) {
    const id = `${object}\u0000${key}`;
    if (seen.has(id)) dups.push(path ? `${path}.${key}` : key);
    seen.add(id);
  }
  return dups;
}
