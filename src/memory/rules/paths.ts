/**
 * Pure path rules of the memory sync.
 *
 * Two spellings of one memory path exist: the server's (`/notes/todo.md`, leading slash) and the
 * store-relative one used for local files and in the sync state (`notes/todo.md`). Every path that
 * crosses between them goes through {@link remotePathToRel} or {@link checkRelPath}, which refuse
 * anything that could escape the mount root or clash with our own files: `..`, `.`, empty
 * segments, NUL and other control characters, backslashes, over-long names, the marker path and
 * our temp-file prefix. No filesystem access here.
 */

import { MARKER_FILE_NAME } from './marker.js';

/** Name prefix of our atomic-write temp files (temp + rename). Reserved at every depth: never synced either way. */
export const TEMP_FILE_PREFIX = '.maw-tmp-';

/** Longest file or folder name most POSIX filesystems accept, in UTF-8 bytes. */
export const MAX_SEGMENT_BYTES = 255;

/** Longest server memory path, in UTF-8 bytes including the leading `/`. */
export const MAX_PATH_BYTES = 1024;

/** Most segments a server memory path may have. */
export const MAX_PATH_SEGMENTS = 20;

/** Result of a path check: the normalised store-relative path, or why it was refused. */
export type PathCheck = { ok: true; rel: string } | { ok: false; reason: string };

/** Result of a mount-path check: the clean absolute path, or why it was refused. */
export type MountPathCheck = { ok: true; path: string } | { ok: false; reason: string };

/** Counted without encoding: a path check allocates nothing for the bytes it measures. */
function utf8Length(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/**
 * Printable ASCII only: such a path holds no control or format character, is in NFC already and
 * takes one byte per character, so the Unicode checks are skipped for it (most paths are).
 */
const PRINTABLE_ASCII = /^[\u0020-\u007e]*$/u;

/** C0 controls, DEL, C1 controls, and the Unicode line/paragraph separators. */
// eslint-disable-next-line no-control-regex
const CONTROL_CHARS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/u;

/**
 * Unicode format characters (general category Cf: bidi overrides such as U+202E, zero-width
 * joiners, the BOM, ...). The API refuses memory paths holding one, since they make a path read
 * differently from what it is.
 */
const FORMAT_CHARS = /\p{Cf}/u;

function codePointName(ch: string): string {
  return `U+${(ch.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * Why `text` breaks the API's Unicode rules for a memory path (a format character, or not in NFC),
 * or undefined. The reason names the character and the fix.
 */
export function unicodeProblem(text: string): string | undefined {
  const format = FORMAT_CHARS.exec(text);
  if (format !== null) {
    return `contains the invisible format character ${codePointName(format[0])}, which the API refuses in a memory path; rename it without that character`;
  }
  if (text.normalize('NFC') !== text) {
    return `is not in Unicode NFC form, which the API requires of a memory path; rename it to its composed spelling ${JSON.stringify(text.normalize('NFC'))}`;
  }
  return undefined;
}

function describeChar(text: string): string {
  const found = CONTROL_CHARS.exec(text);
  if (found === null) return 'a control character';
  const code = found[0].codePointAt(0) ?? 0;
  return `control character U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** True when `rel` is one of our own names: the marker at the root, or a temp file at any depth. */
export function isReservedRelPath(rel: string): boolean {
  if (rel === MARKER_FILE_NAME) return true;
  const segments = rel.split('/');
  return segments.some((segment) => segment.startsWith(TEMP_FILE_PREFIX));
}

/** True when a single file name is one of our temp files (the local scan skips them). */
export function isTempFileName(name: string): boolean {
  return name.startsWith(TEMP_FILE_PREFIX);
}

/**
 * Check a store-relative path (`notes/todo.md`, no leading slash) as found locally or kept in the
 * sync state. Accepts it only when it is safe to join below the mount root and uploadable:
 * 1–20 non-empty segments, none `.` or `..`, no NUL/control/format characters/backslash, in
 * Unicode NFC (as the API requires), each segment
 * ≤ 255 bytes, the whole server path (`/` + rel) ≤ 1024 bytes, and not reserved.
 */
export function checkRelPath(rel: string): PathCheck {
  if (rel.length === 0) return { ok: false, reason: 'empty path' };
  if (rel.startsWith('/')) return { ok: false, reason: `path "${rel}" is absolute; expected a store-relative path` };
  if (rel.includes('\\')) return { ok: false, reason: `path "${rel}" contains a backslash` };
  const ascii = PRINTABLE_ASCII.test(rel);
  if (!ascii && CONTROL_CHARS.test(rel)) {
    return { ok: false, reason: `path ${JSON.stringify(rel)} contains ${describeChar(rel)}` };
  }
  const unicode = ascii ? undefined : unicodeProblem(rel);
  if (unicode !== undefined) return { ok: false, reason: `path ${JSON.stringify(rel)} ${unicode}` };
  const segments = rel.split('/');
  if (segments.length > MAX_PATH_SEGMENTS) {
    return { ok: false, reason: `path "${rel}" has ${segments.length} segments; at most ${MAX_PATH_SEGMENTS} are allowed` };
  }
  for (const segment of segments) {
    if (segment.length === 0) return { ok: false, reason: `path "${rel}" has an empty segment` };
    if (segment === '.' || segment === '..') {
      return { ok: false, reason: `path "${rel}" has a "${segment}" segment` };
    }
    const bytes = ascii ? segment.length : utf8Length(segment);
    if (bytes > MAX_SEGMENT_BYTES) {
      return {
        ok: false,
        reason: `path "${rel.slice(0, 80)}…" has a ${bytes}-byte name; at most ${MAX_SEGMENT_BYTES} bytes fit a file name`,
      };
    }
  }
  const totalBytes = (ascii ? rel.length : utf8Length(rel)) + 1;
  if (totalBytes > MAX_PATH_BYTES) {
    return { ok: false, reason: `path "${rel.slice(0, 80)}…" is ${totalBytes} bytes; at most ${MAX_PATH_BYTES} are allowed` };
  }
  if (rel === MARKER_FILE_NAME) {
    return { ok: false, reason: `"${rel}" is the store marker path, reserved for the marker file` };
  }
  if (isReservedRelPath(rel)) {
    return { ok: false, reason: `path "${rel}" uses the reserved temp-file prefix "${TEMP_FILE_PREFIX}"` };
  }
  return { ok: true, rel };
}

/**
 * Convert a server memory path (`/notes/todo.md`) into a store-relative path (`notes/todo.md`),
 * or refuse it. Leading slashes are stripped (the server path always starts with one); then the
 * rules of {@link checkRelPath} apply.
 */
export function remotePathToRel(serverPath: string): PathCheck {
  if (serverPath.includes('\u0000')) {
    return { ok: false, reason: `server path ${JSON.stringify(serverPath)} contains a NUL character` };
  }
  const rel = serverPath.replace(/^\/+/u, '');
  if (rel.length === 0) return { ok: false, reason: `server path "${serverPath}" names no file` };
  return checkRelPath(rel);
}

/** The server spelling of a store-relative path: a leading `/` added. */
export function relToRemotePath(rel: string): string {
  return `/${rel}`;
}

/**
 * Check a store's `mount_path`: absolute, not the filesystem root, no `.`/`..`/empty segments
 * (so no `//` and no trailing `/`), no NUL or control characters, no backslash, each segment
 * ≤ 255 bytes. The reason says what is wrong; the caller adds the store id and the fix.
 */
export function checkMountPath(mountPath: string): MountPathCheck {
  if (mountPath.length === 0) return { ok: false, reason: 'mount_path is empty' };
  if (!mountPath.startsWith('/')) return { ok: false, reason: `mount_path "${mountPath}" is not absolute` };
  if (mountPath === '/') return { ok: false, reason: 'mount_path is the filesystem root "/"' };
  if (CONTROL_CHARS.test(mountPath)) {
    return { ok: false, reason: `mount_path ${JSON.stringify(mountPath)} contains ${describeChar(mountPath)}` };
  }
  if (mountPath.includes('\\')) return { ok: false, reason: `mount_path "${mountPath}" contains a backslash` };
  const segments = mountPath.slice(1).split('/');
  for (const segment of segments) {
    if (segment.length === 0) return { ok: false, reason: `mount_path "${mountPath}" has an empty segment` };
    if (segment === '.' || segment === '..') {
      return { ok: false, reason: `mount_path "${mountPath}" has a "${segment}" segment` };
    }
    if (utf8Length(segment) > MAX_SEGMENT_BYTES) {
      return { ok: false, reason: `mount_path "${mountPath}" has a name longer than ${MAX_SEGMENT_BYTES} bytes` };
    }
  }
  return { ok: true, path: mountPath };
}

/**
 * Fold a path for comparison on a case-insensitive filesystem: Unicode NFC, then a full case fold
 * approximated by upper- then lower-casing (so `ß` and `SS` meet, as they do on APFS).
 */
export function foldCase(rel: string): string {
  return rel.normalize('NFC').toUpperCase().toLowerCase();
}

/** One path left out because it collides, case-insensitively, with a kept one. */
export interface ShadowedPath {
  /** The path not materialised and never synced. */
  path: string;
  /** The kept path it collides with (the file itself or one of its folders). */
  keptPath: string;
  /** Human-readable reason, suitable for `StoreSyncState.shadowed[path].reason` and a warning. */
  reason: string;
}

/** Why `path` is not synced: it collides, through `clash` (the file or one of its folders), with the kept `keptPath`. */
export function caseCollisionReason(path: string, clash: string, keptPath: string): string {
  return (
    `"${path}" differs only by letter case from "${clash}" on a case-insensitive filesystem; ` +
    `"${keptPath}" is kept and "${path}" is not synced (use a case-sensitive filesystem to sync both)`
  );
}

/** Result of {@link groupCaseCollisions}. */
export interface CaseCollisionGroups {
  /** Paths safe to materialise together, in ascending code-unit order. */
  kept: string[];
  /** Paths that would overwrite (or share a folder spelled differently with) a kept path. */
  shadowed: ShadowedPath[];
}

/**
 * Split paths into those that can live together on a case-insensitive filesystem and those that
 * cannot. Deterministic: paths are taken in ascending code-unit order (`A.md` before
 * `a.md`), and a path is kept only if every prefix of it (each folder and the file itself) folds
 * to a spelling not already taken by a kept path under a different spelling. `A/x.md` and
 * `a/y.md` collide too: on such a filesystem both would land in one folder, and the next scan
 * would see `A/y.md` and treat it as a new file.
 */
export function groupCaseCollisions(paths: Iterable<string>): CaseCollisionGroups {
  const sorted = [...new Set(paths)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const spellingByFold = new Map<string, string>();
  const kept: string[] = [];
  const shadowed: ShadowedPath[] = [];
  for (const path of sorted) {
    const segments = path.split('/');
    const prefixes: string[] = [];
    for (let i = 1; i <= segments.length; i++) prefixes.push(segments.slice(0, i).join('/'));
    let clash: string | undefined;
    for (const prefix of prefixes) {
      const existing = spellingByFold.get(foldCase(prefix));
      if (existing !== undefined && existing !== prefix) {
        clash = existing;
        break;
      }
    }
    if (clash !== undefined) {
      const keptPath = kept.find((k) => k === clash || k.startsWith(`${clash}/`)) ?? clash;
      shadowed.push({ path, keptPath, reason: caseCollisionReason(path, clash, keptPath) });
      continue;
    }
    for (const prefix of prefixes) spellingByFold.set(foldCase(prefix), prefix);
    kept.push(path);
  }
  return { kept, shadowed };
}
