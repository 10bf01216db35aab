/** A bad command line: unknown command or flag, or a flag value out of range. Exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
