import type { Command } from './command.js';
import { doctorCommand } from './doctor/command.js';

/** Every subcommand, in the order `--help` lists them. */
export function commands(): Command[] {
  return [doctorCommand()];
}
