/**
 * Every error this library throws is a {@link WorkerError} with a stable `code`.
 * Match on `err.code`, never on the message text: messages may be reworded, codes never change.
 *
 * | code                         | class                   | a caller can…                                         |
 * |------------------------------|-------------------------|-------------------------------------------------------|
 * | `MAW_CONFIG`                 | {@link ConfigError}      | fix the option named in the message                   |
 * | `MAW_UNSUPPORTED_PLATFORM`   | {@link PlatformError}    | run on Linux or macOS                                 |
 * | `MAW_REMOTE_API`             | {@link RemoteApiError}   | retry (when `retryable`) or fix credentials/ids       |
 * | `MAW_LEASE_LOST`             | {@link LeaseLostError}   | nothing: the item now belongs to another worker       |
 * | `MAW_MEMORY_MOUNT`           | {@link MemoryMountError} | prepare the host as the message says                  |
 * | `MAW_MEMORY_UNAVAILABLE`     | {@link MemoryUnavailableError} | forward the work secret or turn memory off      |
 * | `MAW_MISSING_INPUT`          | {@link MissingInputError} | pass the named value or set its environment variable |
 * | `MAW_WORK_FAILED`            | {@link WorkItemFailedError} | read `cause` (the typed reason) and `outcome`; the item is already stopped |
 * | `MAW_REMOTE_LIMIT`           | {@link RemoteLimitError} | check the base URL points at the API; the answer broke a documented bound |
 * | `MAW_STATE_FILE`             | {@link StateFileError}   | check the file named under `stateDir`; an unreadable one is ignored |
 * | `MAW_SANDBOX`                | {@link SandboxUnavailableError} | make a sandbox start as the message says (bubblewrap, user namespaces, a container's /proc, seccomp or AppArmor settings); or choose `sandbox: 'none'` |
 * | `MAW_INTERNAL`               | {@link InternalError}    | report it: a rule of the library itself broke (the message says which) |
 *
 * What the library throws or rejects with is one of these; an error from Node, the SDK or a tool
 * is kept as its `cause`.
 */
export type WorkerErrorCode =
  | 'MAW_CONFIG'
  | 'MAW_UNSUPPORTED_PLATFORM'
  | 'MAW_REMOTE_API'
  | 'MAW_LEASE_LOST'
  | 'MAW_MEMORY_MOUNT'
  | 'MAW_MEMORY_UNAVAILABLE'
  | 'MAW_MISSING_INPUT'
  | 'MAW_WORK_FAILED'
  | 'MAW_REMOTE_LIMIT'
  | 'MAW_STATE_FILE'
  | 'MAW_SANDBOX'
  | 'MAW_INTERNAL';

/** Base class of every error thrown by this library. */
export class WorkerError extends Error {
  /** The stable code of this failure; match on it, never on the message. */
  readonly code: WorkerErrorCode;

  /** Makes an error with its code and message; `options.cause` keeps the error it wraps. */
  constructor(code: WorkerErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.name = new.target.name;
  }
}

/** An option was missing, of the wrong type or out of range. The message names it and the accepted range. */
export class ConfigError extends WorkerError {
  /** One line per problem, `path: expected ..., got ...`. */
  readonly issues: readonly string[];

  /** Makes a config error from its message and one line per problem (`issues`). */
  constructor(message: string, issues: readonly string[] = [], options?: { cause?: unknown }) {
    super('MAW_CONFIG', message, options);
    this.issues = issues;
  }
}

/** The worker refuses to run on this platform (Windows: memory folders need POSIX semantics and O_NOFOLLOW). */
export class PlatformError extends WorkerError {
  /** `process.platform` of the host that was refused (`win32`). */
  readonly platform: string;

  /** Makes the error for the refused platform, with a message that names it and the way out. */
  constructor(platform: string) {
    super(
      'MAW_UNSUPPORTED_PLATFORM',
      `managed-agents-worker needs a POSIX host (Linux or macOS); this process runs on "${platform}". ` +
        'Run the worker inside WSL2, a Linux container or a Linux VM.',
    );
    this.platform = platform;
  }
}

/** A call to the Anthropic API failed. `status` is undefined for network failures and timeouts. */
export class RemoteApiError extends WorkerError {
  /** The HTTP status of the answer, or undefined when no answer came (network failure, timeout). */
  readonly status: number | undefined;
  /** The `request-id` header of the answer, when it had one: quote it when reporting the failure. */
  readonly requestId: string | undefined;
  /** True when the same request may succeed later (408, 409, 429, 5xx, network). */
  readonly retryable: boolean;

  /** Makes an API error from its message, the answer's status and request id, and whether a retry may succeed. */
  constructor(
    message: string,
    fields: { status?: number | undefined; requestId?: string | undefined; retryable: boolean },
    options?: { cause?: unknown },
  ) {
    super('MAW_REMOTE_API', message, options);
    this.status = fields.status;
    this.requestId = fields.requestId;
    this.retryable = fields.retryable;
  }
}

/** The server says the lease on a work item belongs to someone else now. */
export class LeaseLostError extends WorkerError {
  /** The work item whose lease was lost. */
  readonly workId: string;

  /** Makes the error for the work item whose lease was lost; the default message names it. */
  constructor(workId: string, message?: string, options?: { cause?: unknown }) {
    super('MAW_LEASE_LOST', message ?? `lease on work item ${workId} was lost; the item was left to its new owner`, options);
    this.workId = workId;
  }
}

/** A memory store could not be mounted. The message names the store, the path and the fix. */
export class MemoryMountError extends WorkerError {
  /** The memory store that could not be mounted, when known. */
  readonly storeId: string | undefined;
  /** The local folder or file involved, when known. */
  readonly path: string | undefined;

  /** Makes a mount error from its message and the store and path involved. */
  constructor(message: string, fields: { storeId?: string | undefined; path?: string | undefined } = {}, options?: { cause?: unknown }) {
    super('MAW_MEMORY_MOUNT', message, options);
    this.storeId = fields.storeId;
    this.path = fields.path;
  }
}

/**
 * A session has memory stores attached, memory is on, but the work item carried no sessions token,
 * so the stores cannot be mounted (the memory endpoints reject the environment key).
 */
export class MemoryUnavailableError extends WorkerError {
  /** The work item whose session could not have its memory. */
  readonly workId: string;
  /** The session with memory stores attached. */
  readonly sessionId: string;

  /** Makes the error for the work item and session; the message says how to forward the work secret. */
  constructor(workId: string, sessionId: string) {
    super(
      'MAW_MEMORY_UNAVAILABLE',
      `session ${sessionId} (work item ${workId}) has memory stores attached but its work item carried no ` +
        'sessions token, and the memory endpoints do not accept the environment key. Forward the work ' +
        "item's `secret` to the worker (handleItem({ workSecret }) or ANTHROPIC_WORK_SECRET), or set " +
        '`memorySyncIntervalMs: null` to run sessions without their memory stores.',
    );
    this.workId = workId;
    this.sessionId = sessionId;
  }
}

/** A required value (work id, environment id, …) was neither passed nor set in the environment. */
export class MissingInputError extends WorkerError {
  /** The option or argument that was missing (`workId`, `environmentId`, …). */
  readonly field: string;
  /** The environment variable that could have supplied it, when there is one. */
  readonly envVar: string | undefined;

  /**
   * Makes the error naming the missing value, its environment variable and the call that needed it (`context`, default `handleItem`).
   */
  constructor(field: string, envVar?: string, context = 'handleItem') {
    super('MAW_MISSING_INPUT', `${context}: ${field} is required; pass it` + (envVar ? ` or set ${envVar}` : ''));
    this.field = field;
    this.envVar = envVar;
  }
}

/** How a failed work item ended, as {@link WorkItemFailedError} carries it (an `ItemOutcome` with status `failed`). */
export interface FailedItemOutcome {
  /** The work item's id. */
  workId: string;
  /** The session's id, or undefined when the item failed before its session was known. */
  sessionId: string | undefined;
  /** Always `failed`. */
  status: 'failed';
  /** Why the item failed, when known. */
  error?: Error;
  /** Milliseconds from the start of the item's handling to the end of its teardown. */
  durationMs: number;
}

/**
 * `EnvironmentWorker.handleItem()` rejects with this when the item failed (memory could not be
 * mounted, the session could not be fetched, no usable credential, …), as the official worker's
 * `handleItem()` rejects. By then the item's teardown has run: its folders are removed and it is
 * stopped. `cause` is the typed reason (also `outcome.error`); `outcome` is how the item ended.
 */
export class WorkItemFailedError extends WorkerError {
  /** The work item that failed. */
  readonly workId: string;
  /** The session of the item, or undefined when the item failed before its session was known. */
  readonly sessionId: string | undefined;
  /** How the item ended. */
  readonly outcome: FailedItemOutcome;

  /** Makes the error from the failed item's outcome; its `error` becomes the `cause`. */
  constructor(outcome: FailedItemOutcome) {
    const reason = outcome.error?.message ?? 'no reason recorded';
    super(
      'MAW_WORK_FAILED',
      `work item ${outcome.workId}${outcome.sessionId ? ` (session ${outcome.sessionId})` : ''} failed: ${reason}`,
      outcome.error === undefined ? undefined : { cause: outcome.error },
    );
    this.workId = outcome.workId;
    this.sessionId = outcome.sessionId;
    this.outcome = outcome;
  }
}

/** Which bound a server answer broke (see {@link RemoteLimitError}). */
export type RemoteLimit = 'memory-count' | 'page-count' | 'repeated-cursor' | 'malformed' | 'duplicate-path' | 'body-size';

/**
 * A server answer broke a documented bound (a listing past the store's memory cap, a cursor seen
 * twice, a body larger than its content can be, a malformed page); the worker stopped reading it.
 */
export class RemoteLimitError extends WorkerError {
  /** Which bound the answer broke. */
  readonly limit: RemoteLimit;
  /** The memory store whose answer broke it, when known. */
  readonly storeId: string | undefined;

  /** Makes the error from the broken bound, its message and the store involved. */
  constructor(limit: RemoteLimit, message: string, fields: { storeId?: string | undefined } = {}, options?: { cause?: unknown }) {
    super('MAW_REMOTE_LIMIT', message, options);
    this.limit = limit;
    this.storeId = fields.storeId;
  }
}

/**
 * A file the worker keeps under its state directory (a journal entry, a sync state, a conflict
 * copy) is unreadable, malformed or cannot be written. A journal entry that fails to read is
 * ignored, and the folder it describes is left in place.
 */
export class StateFileError extends WorkerError {
  /** The file or folder involved, when known. */
  readonly path: string | undefined;

  /** Makes a state-file error from its message and the path involved. */
  constructor(message: string, fields: { path?: string | undefined } = {}, options?: { cause?: unknown }) {
    super('MAW_STATE_FILE', message, options);
    this.path = fields.path;
  }
}

/** A rule the library keeps for itself broke (a case no code handles, a relative path where only absolute ones are made). */
export class InternalError extends WorkerError {
  /** Makes the error; the message gets a request to report it appended. */
  constructor(message: string, options?: { cause?: unknown }) {
    super('MAW_INTERNAL', `${message} (a bug in managed-agents-worker; please report it with this message)`, options);
  }
}

/** Wrap anything thrown into an Error, so logs and events always carry a message. */
export function coerceError(e: unknown): Error {
  if (e instanceof Error) return e;
  return new Error(typeof e === 'string' ? e : `non-error thrown: ${safeString(e)}`);
}

function safeString(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

/**
 * Why no sandbox starts: `platform` (not Linux), `missing` (no bubblewrap), `host_entry_missing`
 * (the package is not built), `userns_disabled` (user namespaces off by sysctl), `apparmor` (an
 * AppArmor restriction or profile), `seccomp` (a container's seccomp profile refuses namespaces or
 * mount), `proc_masked` (a container's masked `/proc`), `uid_map` (no uid map for the sandbox's user
 * namespace), `probe_failed` (anything else; the message has bubblewrap's words).
 */
export type SandboxFailureReason =
  'platform' | 'missing' | 'host_entry_missing' | 'userns_disabled' | 'apparmor' | 'seccomp' | 'proc_masked' | 'uid_map' | 'probe_failed';

/**
 * `sandbox: 'bwrap'` was asked for and no sandbox can start here: bubblewrap is missing, user
 * namespaces are blocked, or the platform has none. `reason` says which; the message gives the fix.
 */
export class SandboxUnavailableError extends WorkerError {
  /** Why no sandbox starts; the message gives the fix for it. */
  readonly reason: SandboxFailureReason;

  /** Makes the error from the reason and a message that says how to fix it. */
  constructor(reason: SandboxUnavailableError['reason'], message: string, options?: { cause?: unknown }) {
    super('MAW_SANDBOX', message, options);
    this.reason = reason;
  }
}
