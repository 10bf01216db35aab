import type { Command as CommanderCommand, OptionValues } from 'commander';
import type { ExitCodeRow } from './exit-codes.js';
import type { CommandIo } from './io.js';

/**
 * One CLI subcommand. The CLI turns it into a commander command: `summary` in the top-level list,
 * `description`, the flags `flags` declares, then the environment variables and exit codes it reads
 * and returns. Adding a command is one file exporting a `Command` and one line in `commands.ts`.
 */
export interface Command {
  name: string;
  /** One line for the top-level help. */
  summary: string;
  /** What the command does, under its usage line. */
  description: string;
  /** Every exit code this command can return, with what it means here. */
  exitCodes: readonly ExitCodeRow[];
  /** Environment variables the command reads, with what each is for. */
  environment?: ReadonlyArray<readonly [name: string, meaning: string]>;
  /** Declares the flags (and positional arguments, if any) on the commander command. */
  flags(cmd: CommanderCommand): void;
  /** Runs with the parsed flag values (camelCase keys, as commander names them); returns the exit code. */
  run(flags: OptionValues, io: CommandIo, args: string[]): Promise<number>;
}
