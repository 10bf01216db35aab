/**
 * Exit codes of the `managed-agents-worker` CLI. Scripts and orchestrators match on these numbers;
 * they never change meaning. Each command's `--help` lists the ones that command can return.
 */
export const EXIT = {
  /** Success: clean shutdown (`run`, `launch`, `emulator`), session ended (`handle`), all checks passed (`doctor`), every outcome right (`demo`). */
  OK: 0,
  /** An unexpected error; the message says what happened. */
  UNEXPECTED: 1,
  /** Bad command line: unknown command or flag, bad flag value. */
  USAGE: 2,
  /** Configuration refused: a missing id or key, an unreadable key file, an option out of range, an unsupported platform. */
  CONFIG: 3,
  /** The API refused the worker for good (401/403/404 on poll): wrong key or environment id. */
  FATAL_API: 4,
  /** `doctor` found a failing check, or `demo` saw a wrong outcome. */
  CHECK_FAILED: 5,
  /** `handle`: the session failed (mount refused, missing secret, runner error). */
  SESSION_FAILED: 10,
  /** `handle`: the lease was lost; the item now belongs to another worker. */
  LEASE_LOST: 11,
  /** `handle`: the server asked the item to stop. */
  STOPPED_BY_SERVER: 12,
  /** A second SIGINT: exit at once, without waiting for the drain. */
  SECOND_SIGINT: 130,
  /** A second SIGTERM: exit at once, without waiting for the drain. */
  SECOND_SIGTERM: 143,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** One row of a command's exit-code list: the code and what it means for that command. */
export type ExitCodeRow = readonly [ExitCode, string];

/** Rows every command shares. */
export const COMMON_EXIT_ROWS = {
  unexpected: [EXIT.UNEXPECTED, 'unexpected error (the message says what happened)'],
  usage: [EXIT.USAGE, 'usage error: unknown command or flag, bad flag value'],
  config: [
    EXIT.CONFIG,
    'configuration refused: missing id or key, unreadable key file, unsupported platform, no working sandbox (the message names the cause and the fix)',
  ],
  fatalApi: [EXIT.FATAL_API, 'the API refused the credentials for good (401/403/404 on poll)'],
  secondSignal: [EXIT.SECOND_SIGINT, 'second SIGINT: exit at once, without waiting for the drain'],
  secondTerm: [EXIT.SECOND_SIGTERM, 'second SIGTERM: exit at once, without waiting for the drain'],
} as const satisfies Record<string, ExitCodeRow>;

/** The exit code `handle` reports for each way a session can end. */
export function exitCodeForOutcome(status: 'completed' | 'skipped' | 'failed' | 'lease_lost' | 'stopped_by_server' | 'aborted'): ExitCode {
  switch (status) {
    case 'completed':
    case 'skipped':
    // Only a shutdown signal aborts the item `handle` serves, after its final sync and flush.
    case 'aborted':
      return EXIT.OK;
    case 'failed':
      return EXIT.SESSION_FAILED;
    case 'lease_lost':
      return EXIT.LEASE_LOST;
    case 'stopped_by_server':
      return EXIT.STOPPED_BY_SERVER;
    default: {
      const never: never = status;
      return never;
    }
  }
}
