/**
 * The environment inside a session's sandbox: a short allow-list of the worker's variables (how to
 * find programs, the locale, the time zone, the terminal type) plus the names the operator passes,
 * never an `ANTHROPIC_*` one, with `HOME` at the session's workdir and `TMPDIR` at the private
 * `/tmp`. Nothing else of the worker's environment (keys, tokens, cloud credentials) goes in.
 */
export const SANDBOX_ALLOWED_ENV = [
  'PATH',
  'LANG',
  'LANGUAGE',
  'LC_ALL',
  'LC_CTYPE',
  'LC_MESSAGES',
  'LC_COLLATE',
  'LC_NUMERIC',
  'LC_TIME',
  'TZ',
  'TERM',
] as const;

const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';

export function sandboxEnvironment(
  source: Readonly<Record<string, string | undefined>>,
  passed: readonly string[],
  workdir: string,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of [...SANDBOX_ALLOWED_ENV, ...passed]) {
    const value = source[name];
    if (value !== undefined && !name.toUpperCase().startsWith('ANTHROPIC_')) env[name] = value;
  }
  env['PATH'] ??= DEFAULT_PATH;
  env['HOME'] = workdir;
  env['TMPDIR'] = '/tmp';
  return env;
}
