import type { Command } from './command.js';
import { demoCommand } from './demo-command.js';
import { doctorCommand } from './doctor/command.js';
import { emulatorCommand } from './emulator/command.js';
import { handleCommand } from './handle-command.js';
import { launchCommand } from './launch-command.js';
import { recoverCommand } from './recover-command.js';
import { runCommand } from './run-command.js';

/** Every subcommand, in the order `--help` lists them. */
export function commands(): Command[] {
  return [runCommand, handleCommand, launchCommand, doctorCommand(), recoverCommand, demoCommand, emulatorCommand];
}
