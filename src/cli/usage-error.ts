import { ConfigError } from '../errors.js';

/** A bad command line: unknown command or flag, or a flag value out of range. Exit code 2. */
export class UsageError extends ConfigError {}
