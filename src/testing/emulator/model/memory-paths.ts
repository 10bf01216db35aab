/**
 * Memory path rules of the API, as pure functions: validity, overlap between
 * two paths, and the `path_prefix` / `depth` listing view.
 */

export const MAX_PATH_BYTES = 1024;
export const MAX_PATH_SEGMENTS = 20;

// Control characters (C0, DEL, C1), Unicode format characters, line/paragraph separators.
const FORBIDDEN_CHARS = /[\u0000-\u001f\u007f-\u009f\p{Cf}\u2028\u2029]/u;

/** Why `path` is not a valid memory path, or `null` when it is. */
export function memoryPathProblem(path: string): string | null {
  if (!path.startsWith('/')) return 'must start with "/"';
  if (Buffer.byteLength(path, 'utf8') > MAX_PATH_BYTES) return `must be at most ${MAX_PATH_BYTES} bytes`;
  if (FORBIDDEN_CHARS.test(path)) return 'must not contain control or format characters';
  if (path.normalize('NFC') !== path) return 'must be in Unicode NFC form';
  const segments = path.slice(1).split('/');
  if (segments.length > MAX_PATH_SEGMENTS) return `must have at most ${MAX_PATH_SEGMENTS} segments`;
  for (const segment of segments) {
    if (segment === '') return 'must not contain empty segments (no "//" and no trailing "/")';
    if (segment === '.' || segment === '..') return 'must not contain "." or ".." segments';
  }
  return null;
}

/** True when one path equals the other or is an ancestor of it (`/notes` vs `/notes/todo.md`). */
export function pathsOverlap(a: string, b: string): boolean {
  return a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`);
}

/** Why `prefix` is not a valid `path_prefix`, or `null` when it is. */
export function pathPrefixProblem(prefix: string): string | null {
  if (!prefix.startsWith('/')) return 'must start with "/"';
  if (!prefix.endsWith('/')) return 'must end with "/"';
  return null;
}

/** One row of a listing: a memory path, or a `memory_prefix` roll-up (trailing `/`). */
export type ListingEntry = { kind: 'memory'; path: string } | { kind: 'prefix'; path: string };

/**
 * The entries a listing shows, ascending by path: every memory below `prefix` (whole-segment
 * match), or with `depth > 0` the memories at most `depth` segments below it plus one
 * `memory_prefix` per deeper sub-folder.
 */
export function listingEntries(paths: Iterable<string>, prefix: string, depth: number): ListingEntry[] {
  const memories: ListingEntry[] = [];
  const prefixes = new Set<string>();
  for (const path of paths) {
    if (!path.startsWith(prefix)) continue;
    if (depth <= 0) {
      memories.push({ kind: 'memory', path });
      continue;
    }
    const rest = path.slice(prefix.length).split('/');
    if (rest.length <= depth) memories.push({ kind: 'memory', path });
    else prefixes.add(`${prefix}${rest.slice(0, depth).join('/')}/`);
  }
  const entries = [...memories, ...[...prefixes].map((path): ListingEntry => ({ kind: 'prefix', path }))];
  entries.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
  return entries;
}
