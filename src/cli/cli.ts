import { Command as CommanderCommand, CommanderError } from 'commander';
import { ConfigError, MissingInputError, PlatformError, RemoteApiError, SandboxUnavailableError, WorkerError } from '../errors.js';
import { errorSummary, type Logger } from '../internal/logger.js';
import type { Command } from './command.js';
import { EXIT, type ExitCode } from './exit-codes.js';
import { addHelpSections } from './help.js';
import type { CliIo, CommandIo } from './io.js';
import { takeCredentials } from './secrets.js';
import { UsageError } from './usage-error.js';
import { packageVersion } from './version.js';

export const PROGRAM = 'managed-agents-worker';

const DESCRIPTION = 'Run Claude Managed Agents sessions on this machine, with memory stores mounted as folders.';

const TOP_LEVEL_NOTES = `
"${PROGRAM} help <command>" shows the flags, environment variables
and exit codes of a command.

Logs are JSON lines on stderr (stdout stays free for command output); --pretty
switches to pino-pretty when it is installed. MAW_LOG_LEVEL sets the log level
when --log-level is not given. Every ANTHROPIC_* credential (a name with KEY,
SECRET or TOKEN, and ANTHROPIC_CUSTOM_HEADERS) is read once at start and removed
from the process environment, so no child process (the agent's tools, a sandbox
command) inherits it.
`;

/**
 * Dispatch `argv` (without `node` and the script) to a command and return the exit code. Usage
 * mistakes get commander's message with a "did you mean" and exit 2; errors a user can fix become
 * one line on stderr and a documented exit code. Nothing here calls `process.exit`, so tests run
 * commands in-process.
 */
export async function runCli(argv: string[], io: CliIo, commands: readonly Command[]): Promise<number> {
  const { snapshot, scrub } = takeCredentials(io.env);
  const commandIo: CommandIo = { ...io, env: snapshot, childEnv: io.env, environScrub: scrub };
  let code: number = EXIT.OK;
  const program = new CommanderCommand(PROGRAM)
    .description(DESCRIPTION)
    .version(versionText(), '-v, --version', 'print the version')
    .helpOption('-h, --help', 'show this help')
    .helpCommand('help [command]', 'show the help of a command')
    .addHelpText('after', TOP_LEVEL_NOTES);
  configureOutput(program, io);
  for (const c of commands) {
    const sub = program.command(c.name).summary(c.summary).description(unwrap(c.description)).helpOption('-h, --help', 'show this help');
    configureOutput(sub, io);
    c.flags(sub);
    addHelpSections(sub, [
      { heading: 'Environment variables:', rows: c.environment ?? [] },
      { heading: 'Exit codes:', rows: c.exitCodes.map(([n, text]) => [String(n), text] as const) },
    ]);
    sub.action(async (...actionArgs: unknown[]) => {
      const cmd = actionArgs[actionArgs.length - 1] as CommanderCommand;
      code = await c.run(cmd.opts(), commandIo, cmd.args);
    });
  }
  // "help <unknown>" is answered like "<unknown>": an unknown command, with a suggestion.
  const helpOfUnknown = argv[0] === 'help' && argv[1] !== undefined && !commands.some((c) => c.name === argv[1]);
  try {
    await program.parseAsync(helpOfUnknown ? [argv[1]!] : argv, { from: 'user' });
    return code;
  } catch (e) {
    if (e instanceof CommanderError) return commanderExitCode(e);
    return reportError(e, io);
  }
}

function versionText(): string {
  try {
    return packageVersion();
  } catch {
    return 'unknown (no package.json found beside the executable)';
  }
}

/** Commander prints its own help and errors to our streams and throws instead of exiting. */
function configureOutput(cmd: CommanderCommand, io: CliIo): void {
  cmd
    .exitOverride()
    .showSuggestionAfterError(true)
    .configureOutput({
      writeOut: (text) => io.stdout(text),
      writeErr: (text) => io.stderr(text),
      outputError: (text, write) => write(`${PROGRAM}: ${text.replace(/^error: /, '')}`),
    });
  if (cmd.name() !== PROGRAM) cmd.showHelpAfterError(`(run "${PROGRAM} help ${cmd.name()}" for its flags)`);
}

/** Help asked for and the version exit 0; every other commander error (help shown for a missing command included) is a usage error. */
function commanderExitCode(e: CommanderError): number {
  const informational = e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help';
  return informational && e.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
}

/** Commander wraps help text itself: join the lines of each paragraph, keep blank lines between paragraphs. */
function unwrap(text: string): string {
  return text.replace(/([^\n])\n(?!\n)/g, '$1 ');
}

/** The exit code a thrown error stands for. */
export function exitCodeForError(e: unknown): ExitCode {
  if (e instanceof UsageError) return EXIT.USAGE;
  if (e instanceof ConfigError || e instanceof PlatformError || e instanceof MissingInputError || e instanceof SandboxUnavailableError) {
    return EXIT.CONFIG;
  }
  return EXIT.UNEXPECTED;
}

/** Print a thrown error as one line (no stack for errors a user can fix) and pick its exit code. */
export function reportError(e: unknown, io: CliIo): number {
  const code = exitCodeForError(e);
  if (code !== EXIT.UNEXPECTED) {
    const message = (e as Error).message;
    io.stderr(`${PROGRAM}: ${message}\n`);
    // Issues the message does not already list, one per line.
    if (e instanceof ConfigError) for (const issue of e.issues) if (!message.includes(issue)) io.stderr(`  ${issue}\n`);
  } else if (e instanceof WorkerError) {
    io.stderr(`${PROGRAM}: ${e.code}: ${e.message}\n`);
  } else {
    io.stderr(`${PROGRAM}: unexpected error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  }
  return code;
}

/**
 * Once a command logs, its failures go into the log stream too (stderr stays JSON only): log the
 * error at `fatal` with its issues and return its exit code.
 */
export function logError(e: unknown, logger: Logger): number {
  const code = exitCodeForError(e);
  const issues = e instanceof ConfigError ? e.issues : undefined;
  if (code === EXIT.UNEXPECTED) logger.fatal({ err: e }, 'unexpected error; exiting');
  else logger.fatal({ err_code: (e as { code?: unknown }).code, issues }, (e as Error).message);
  return code;
}

/**
 * A permanent refusal by the API (wrong key or environment id) is expected, not a crash: one short
 * fatal line naming `subject`, its stack only at debug. Returns the exit code, or `undefined` when
 * `e` is not such a refusal.
 */
export function logRefusedForGood(e: unknown, logger: Logger, subject: string): number | undefined {
  if (!(e instanceof RemoteApiError) || e.retryable) return undefined;
  logger.debug({ err: e }, 'the refusal in full');
  logger.fatal({ error: errorSummary(e) }, `the API refused ${subject} for good; check the environment id and key`);
  return EXIT.FATAL_API;
}
