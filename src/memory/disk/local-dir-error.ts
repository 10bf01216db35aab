export type LocalDirFailure =
  /** a path component (or the file itself) is a symlink */
  | 'symlink'
  /** a path component exists but is not a directory */
  | 'not-directory'
  /** the target exists but is not a regular file (FIFO, socket, device, directory) */
  | 'not-regular'
  /** the relative path is not a clean store-relative path */
  | 'bad-path'
  /** the file is larger than the caller's limit */
  | 'too-large'
  /** the file is not there */
  | 'missing'
  /** a folder was moved or replaced between the moment it was opened and the operation */
  | 'replaced'
  /** the mount was unmounted: nothing is created, written, renamed or removed any more */
  | 'disposed';

/** A refusal of the hardened layer. Internal: callers turn it into a warning or a refusal. */
export class LocalDirError extends Error {
  readonly failure: LocalDirFailure;
  readonly relPath: string;

  constructor(failure: LocalDirFailure, relPath: string, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LocalDirError';
    this.failure = failure;
    this.relPath = relPath;
  }
}

/** The `code` of a Node system error, if any. */
export function errCode(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : undefined;
}
