import { ConfigError, MissingInputError, PlatformError, WorkerError } from '../errors.js';
import type { Command } from './command.js';
import { EXIT, EXIT_CODE_HELP } from './exit-codes.js';
import type { CliIo } from './io.js';
import { UsageError } from './usage-error.js';
import { packageVersion } from './version.js';

/** The top-level help: every command with its one-line summary, then the exit codes. */
export function topLevelHelp(commands: readonly Command[]): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return `Usage: managed-agents-worker <command> [flags]

Run Claude Managed Agents sessions on this machine, with memory stores mounted as folders.

Commands:
${commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n')}

Run "managed-agents-worker <command> --help" for the flags of a command.
"managed-agents-worker --version" (or -v) prints the version.
Logs are JSON lines on stderr; add --pretty (with pino-pretty installed) for humans.

${EXIT_CODE_HELP}
`;
}

/**
 * Dispatch `argv` (without `node` and the script) to a command and return the exit code. Errors a
 * user can fix become one line on stderr and a documented exit code; nothing here calls
 * `process.exit`, so tests run commands in-process.
 */
export async function runCli(argv: string[], io: CliIo, commands: readonly Command[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout(topLevelHelp(commands));
    return name === undefined ? EXIT.USAGE : EXIT.OK;
  }
  if (name === '--version' || name === '-v') {
    io.stdout(`${packageVersion()}\n`);
    return EXIT.OK;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    io.stderr(`managed-agents-worker: unknown command "${name}". Commands: ${commands.map((c) => c.name).join(', ')}.\n`);
    return EXIT.USAGE;
  }
  try {
    return await command.run(rest, io);
  } catch (e) {
    return reportError(e, io);
  }
}

/** Print a thrown error as one line (no stack for errors a user can fix) and pick its exit code. */
export function reportError(e: unknown, io: CliIo): number {
  if (e instanceof UsageError) {
    io.stderr(`managed-agents-worker: ${e.message}\n`);
    return EXIT.USAGE;
  }
  if (e instanceof ConfigError || e instanceof PlatformError || e instanceof MissingInputError) {
    io.stderr(`managed-agents-worker: ${e.message}\n`);
    if (e instanceof ConfigError) for (const issue of e.issues) io.stderr(`  ${issue}\n`);
    return EXIT.CONFIG;
  }
  if (e instanceof WorkerError) {
    io.stderr(`managed-agents-worker: ${e.code}: ${e.message}\n`);
    return EXIT.UNEXPECTED;
  }
  io.stderr(`managed-agents-worker: unexpected error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  return EXIT.UNEXPECTED;
}
