import { readFileSync, statSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { CUSTOM_HEADERS_VARIABLE } from './custom-headers.js';
import { scrubProcEnviron, type EnvironScrub } from './proc-environ.js';

/**
 * The credential variables the CLI takes out of its environment: an `ANTHROPIC_` name (any letter
 * case) holding `KEY`, `SECRET` or `TOKEN` (`ANTHROPIC_ENVIRONMENT_KEY`, `ANTHROPIC_WORK_SECRET`,
 * `ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, ...), and `ANTHROPIC_CUSTOM_HEADERS`, whose headers
 * may authorise requests. The other `ANTHROPIC_*` variables (ids, base URL, `ANTHROPIC_LOG`,
 * OpenTelemetry settings) stay, since the SDK reads them.
 */
export function isAnthropicCredential(name: string): boolean {
  const upper = name.toUpperCase();
  return upper === CUSTOM_HEADERS_VARIABLE || /^ANTHROPIC_\w*(KEY|SECRET|TOKEN)/.test(upper);
}

/**
 * Move every credential variable out of `env` and return a copy of the whole environment as it
 * was. Once removed no child process (the agent's tools, a sandbox command) inherits them. When
 * `env` is this process's own environment, their bytes in `/proc/<pid>/environ` are overwritten
 * too (Linux; `scrub` says whether that worked).
 */
export function takeCredentials(env: NodeJS.ProcessEnv): { snapshot: NodeJS.ProcessEnv; scrub: EnvironScrub } {
  const snapshot = { ...env };
  for (const name of Object.keys(env)) {
    if (isAnthropicCredential(name)) delete env[name];
  }
  const scrub: EnvironScrub =
    env === process.env ? scrubProcEnviron(isAnthropicCredential) : { status: 'unsupported', reason: 'not the process environment' };
  return { snapshot, scrub };
}

/** The path that names this process's standard input. */
const STDIN_PATH = '/dev/stdin';

/**
 * Read a credential from the file a `--*-file` flag names (`/dev/stdin`: this process's input): its content without the trailing line
 * break. Missing, unreadable, empty or over-long files are refused with a message that names the
 * flag and the path, never the content.
 */
export function readSecretFile(flag: string, file: string): string {
  let text: string;
  try {
    if (file === STDIN_PATH) {
      // Read the descriptor itself: a socket on stdin (as some spawners use) cannot be opened by path.
      text = readFileSync(0, 'utf8');
    } else {
      if (!statSync(file).isFile() && !file.startsWith('/dev/')) throw cannotRead(flag, file, 'not a regular file');
      text = readFileSync(file, 'utf8');
    }
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw cannotRead(flag, file, e instanceof Error ? ((e as NodeJS.ErrnoException).code ?? e.message) : String(e));
  }
  const value = text.replace(/\r?\n$/, '');
  if (value === '' || value.length > 4096 || /\s/.test(value)) {
    throw new ConfigError(
      `--${flag} ${file}: expected one credential on one line, without spaces; write the credential alone into the file`,
    );
  }
  return value;
}

function cannotRead(flag: string, file: string, reason: string): ConfigError {
  return new ConfigError(
    `--${flag} ${file}: cannot read the file (${reason}); write the credential alone into a file readable by this user`,
  );
}
