import { readFileSync, statSync } from 'node:fs';
import { ConfigError } from '../errors.js';

/**
 * Move every `ANTHROPIC_*` variable (any letter case) out of `env` and return them as a copy of
 * the whole environment. Credentials arrive as `ANTHROPIC_ENVIRONMENT_KEY`, `ANTHROPIC_WORK_SECRET`,
 * `ANTHROPIC_API_KEY`, ...; once removed from the process environment no child process (the
 * agent's tools, a sandbox command) inherits them. The values stay readable in
 * `/proc/<pid>/environ` of this process for its whole life, which is why the key also has a
 * `--*-file` flag.
 */
export function takeAnthropicVariables(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const snapshot = { ...env };
  for (const name of Object.keys(env)) {
    if (name.toUpperCase().startsWith('ANTHROPIC_')) delete env[name];
  }
  return snapshot;
}

/**
 * Read a credential from the file a `--*-file` flag names: its content without the trailing line
 * break. Missing, unreadable, empty or over-long files are refused with a message that names the
 * flag and the path, never the content.
 */
export function readSecretFile(flag: string, file: string): string {
  let text: string;
  try {
    if (!statSync(file).isFile() && !file.startsWith('/dev/')) throw new Error('not a regular file');
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const reason = e instanceof Error ? ((e as NodeJS.ErrnoException).code ?? e.message) : String(e);
    throw new ConfigError(`--${flag} ${file}: cannot read the file (${reason}); write the credential alone into a file readable by this user`);
  }
  const value = text.replace(/\r?\n$/, '');
  if (value === '' || value.length > 4096 || /\s/.test(value)) {
    throw new ConfigError(`--${flag} ${file}: expected one credential on one line, without spaces; write the credential alone into the file`);
  }
  return value;
}
