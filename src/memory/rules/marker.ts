/**
 * The marker file that binds a folder to its memory store.
 *
 * Format (shared with the official worker, so folders are interchangeable): the UTF-8 bytes of
 * `version 1\n<memory_store_id>`, one `\n`, no trailing newline. A folder whose marker is missing
 * or holds anything else is never synced. Pure: no filesystem access here; the mounter and the
 * sync loop read and write the bytes, and this file says what they mean ({@link markerVerdict}, the
 * one rule both apply) and what a folder skipped for its marker is warned with.
 */

/** File name of the marker, at the root of every mounted store. Reserved: never uploaded, never downloaded. */
export const MARKER_FILE_NAME = '.anthropic-memory-store';

/** The only marker format version this library writes and accepts. */
export const MARKER_VERSION = 1;

/**
 * Read at most this many bytes when checking a marker. A valid marker is
 * `"version 1\n".length + storeId.length` bytes; anything longer is invalid without reading it whole.
 */
export const MARKER_MAX_BYTES = 1024;

const encoder = new TextEncoder();

/** The marker text for `storeId`: `version 1\n<storeId>`. */
export function markerContent(storeId: string): string {
  return `version ${MARKER_VERSION}\n${storeId}`;
}

/** The exact bytes to write into the marker file of `storeId`. */
export function markerBytes(storeId: string): Uint8Array {
  return encoder.encode(markerContent(storeId));
}

/**
 * True when `bytes` is exactly the marker of `storeId`. Byte equality is the same test as the
 * official worker's "SHA-256 of the file equals SHA-256 of the expected text", without hashing.
 * A marker for another store, another version, with a trailing newline or BOM is invalid.
 */
export function isValidMarker(bytes: Uint8Array, storeId: string): boolean {
  if (storeId.length === 0) return false;
  const expected = markerBytes(storeId);
  if (bytes.length !== expected.length) return false;
  for (let i = 0; i < expected.length; i++) {
    if (bytes[i] !== expected[i]) return false;
  }
  return true;
}

/** What a marker says, when it is well formed. */
export interface ParsedMarker {
  /** The format version (1 for every marker this library writes). */
  version: number;
  /** The memory store id the folder belongs to. */
  storeId: string;
}

/**
 * Parse marker bytes without knowing the store in advance (crash recovery reads a leftover folder
 * and asks "which store is this?"). Returns `undefined` for anything that is not
 * `version <n>\n<id>` with a decimal version, a non-empty id without whitespace or control
 * characters, and valid UTF-8.
 */
export function parseMarker(bytes: Uint8Array): ParsedMarker | undefined {
  if (bytes.length === 0 || bytes.length > MARKER_MAX_BYTES) return undefined;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return undefined;
  }
  const match = /^version ([1-9][0-9]{0,8})\n([^\s\u0000-\u001f\u007f]+)$/u.exec(text);
  if (match === null) return undefined;
  const [, version, storeId] = match;
  if (version === undefined || storeId === undefined) return undefined;
  return { version: Number(version), storeId };
}

/** What was found where the marker goes. */
export type MarkerRead =
  | { kind: 'missing' }
  /** A folder, symlink or FIFO where the marker goes: an altered marker, never one to write over. */
  | { kind: 'not-a-file' }
  | { kind: 'bytes'; bytes: Uint8Array };

/**
 * What the marker says about the folder:
 * - `ours`: exactly the marker of this store;
 * - `other-store`: a well-formed marker of another store;
 * - `missing`, `not-a-file`, `malformed`: no usable marker.
 */
export type MarkerVerdict =
  { kind: 'ours' } | { kind: 'other-store'; storeId: string } | { kind: 'missing' } | { kind: 'not-a-file' } | { kind: 'malformed' };

export function markerVerdict(read: MarkerRead, storeId: string): MarkerVerdict {
  switch (read.kind) {
    case 'missing':
    case 'not-a-file':
      return { kind: read.kind };
    case 'bytes': {
      if (isValidMarker(read.bytes, storeId)) return { kind: 'ours' };
      const parsed = parseMarker(read.bytes);
      if (parsed !== undefined && parsed.storeId !== storeId) return { kind: 'other-store', storeId: parsed.storeId };
      return { kind: 'malformed' };
    }
    default:
      return read satisfies never;
  }
}

/** The warning for a skipped folder: what is wrong, what is not done, and the fix. */
export function markerProblemWarning(problem: string, storeId: string): string {
  return `${problem}; this folder is not synced (nothing uploaded, nothing deleted) until the marker holds ${JSON.stringify(markerContent(storeId))} again`;
}

/** The problem of a marker that went away between the scan and the uploads. */
export const MARKER_CHANGED_DURING_SYNC = `marker ${MARKER_FILE_NAME} vanished or changed during the sync`;
