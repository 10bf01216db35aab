/**
 * Exit codes of the `managed-agents-worker` CLI. Scripts and orchestrators match on these numbers;
 * they never change meaning. The same table is printed by `--help` and in the README.
 */
export const EXIT = {
  /** Success: clean shutdown (`run`, `launch`), session completed or skipped (`handle`), all checks passed (`doctor`), every outcome right (`demo`). */
  OK: 0,
  /** An unexpected error; the message says what happened. */
  UNEXPECTED: 1,
  /** Bad command line: unknown command or flag, bad flag value. */
  USAGE: 2,
  /** Configuration refused: a missing id or key, an option out of range, an unsupported platform. */
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
  /** `handle`: the session was aborted by a signal before it ended by itself. */
  ABORTED: 13,
  /** A second SIGINT: exit at once, without waiting for the drain. */
  SECOND_SIGINT: 130,
  /** A second SIGTERM: exit at once, without waiting for the drain. */
  SECOND_SIGTERM: 143,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** The exit-code table, as printed by `--help`. */
export const EXIT_CODE_HELP = `Exit codes:
  0    success (clean shutdown; handle: session completed or skipped; doctor: all checks pass)
  1    unexpected error
  2    usage error (unknown command or flag, bad value)
  3    configuration refused (missing id or key, option out of range, unsupported platform)
  4    the API refused the credentials for good (401/403/404 on poll)
  5    doctor: a check failed; demo: an outcome was wrong
  10   handle: the session failed
  11   handle: the lease was lost to another worker
  12   handle: the server asked the item to stop
  13   handle: aborted by a signal before the session ended
  130  second SIGINT (exit at once)
  143  second SIGTERM (exit at once)`;

/** The exit code `handle` reports for each way a session can end. */
export function exitCodeForOutcome(
  status: 'completed' | 'skipped' | 'failed' | 'lease_lost' | 'stopped_by_server' | 'aborted',
): ExitCode {
  switch (status) {
    case 'completed':
    case 'skipped':
      return EXIT.OK;
    case 'failed':
      return EXIT.SESSION_FAILED;
    case 'lease_lost':
      return EXIT.LEASE_LOST;
    case 'stopped_by_server':
      return EXIT.STOPPED_BY_SERVER;
    case 'aborted':
      return EXIT.ABORTED;
    default: {
      const never: never = status;
      return never;
    }
  }
}
