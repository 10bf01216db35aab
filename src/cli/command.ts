import type { CliIo } from './io.js';

/** One CLI subcommand: its help text and the function that runs it and returns the exit code. */
export interface Command {
  name: string;
  /** One line for the top-level help. */
  summary: string;
  /** The full `--help` text. */
  help: string;
  run(argv: string[], io: CliIo): Promise<number>;
}
