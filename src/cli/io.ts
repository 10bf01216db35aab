import type { EnvironScrub } from './proc-environ.js';

/**
 * What a CLI command may touch outside its arguments: output streams, the environment and the
 * working directory. Tests pass their own, so commands run in-process without a real terminal.
 */
export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  /** The process environment; the CLI removes every `ANTHROPIC_*` credential from it at start. */
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Where the logger writes its lines; default: stderr (fd 2), written synchronously. */
  logStream?: NodeJS.WritableStream;
  /** Lines typed by the user, for commands that take them (`emulator`); absent in tests that give none. */
  stdin?: () => NodeJS.ReadableStream;
}

/**
 * What a command sees: `env` is the environment as it was at start (including the `ANTHROPIC_*`
 * credentials, read once), while `childEnv` is what is left in the process environment for child
 * processes, without them.
 */
export interface CommandIo extends CliIo {
  readonly env: Readonly<NodeJS.ProcessEnv>;
  readonly childEnv: NodeJS.ProcessEnv;
  /** Whether the credential entries of `/proc/<pid>/environ` were overwritten. */
  readonly environScrub: EnvironScrub;
}

export function processIo(): CliIo {
  return {
    stdout: (text) => void process.stdout.write(text),
    stderr: (text) => void process.stderr.write(text),
    env: process.env,
    cwd: process.cwd(),
    // A function, so that only a command that reads input touches process.stdin.
    stdin: () => process.stdin,
  };
}
