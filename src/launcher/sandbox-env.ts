import { decodeWorkSecret } from '../worker/credentials.js';

/**
 * The item variables a sandbox may receive; `handle` (or `EnvironmentWorker.handleItem()`) reads
 * them. `ANTHROPIC_WORK_SECRET` is set only when the item carries a secret, and
 * `ANTHROPIC_ENVIRONMENT_KEY` only when the item's secret yields no sessions token.
 */
export const SANDBOX_ENV_VARS = [
  'ANTHROPIC_WORK_ID',
  'ANTHROPIC_ENVIRONMENT_ID',
  'ANTHROPIC_SESSION_ID',
  'ANTHROPIC_ENVIRONMENT_KEY',
  'ANTHROPIC_WORK_SECRET',
  'ANTHROPIC_BASE_URL',
] as const;

/**
 * Variables copied from the launcher's environment into every sandbox command, when set: what a
 * shell, `docker` or `kubectl` needs to find programs, its home folder and its locale. Nothing
 * else passes unless the operator names it (`passEnv`).
 */
export const SANDBOX_BASE_ENV_VARS = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'TMPDIR',
  'TZ',
  'LANG',
  'LANGUAGE',
  'LC_ALL',
  'LC_CTYPE',
  'LC_MESSAGES',
  'TERM',
  'MAW_LOG_LEVEL',
] as const;

/** A portable environment variable name. */
export const ENV_VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** One claimed item, as the launcher hands it to its sandbox. */
export interface SandboxItem {
  workId: string;
  environmentId: string;
  sessionId: string;
  /** The item's secret as the poll returned it. */
  secret: string | null | undefined;
}

export interface SandboxEnv {
  env: Record<string, string>;
  /** True when the item's secret yields no sessions token, so the environment key went in. */
  environmentKeyPassed: boolean;
}

/**
 * The whole environment of one sandbox command: the allow-listed variables and those named in
 * `passEnv`, read from `source`, then the item's own variables. The environment key goes in only
 * for an item without a usable secret: with one, the sandbox's sessions token covers heartbeats,
 * the session, its memory stores and the stop, and nothing in the sandbox can claim other work.
 */
export function sandboxEnv(input: {
  source: Readonly<Record<string, string | undefined>>;
  passEnv: readonly string[];
  item: SandboxItem;
  environmentKey: string;
  baseURL: string;
}): SandboxEnv {
  const env: Record<string, string> = {};
  for (const name of [...SANDBOX_BASE_ENV_VARS, ...input.passEnv]) {
    const value = input.source[name];
    if (value !== undefined) env[name] = value;
  }
  const { item } = input;
  env['ANTHROPIC_WORK_ID'] = item.workId;
  env['ANTHROPIC_ENVIRONMENT_ID'] = item.environmentId;
  env['ANTHROPIC_SESSION_ID'] = item.sessionId;
  env['ANTHROPIC_BASE_URL'] = input.baseURL;
  if (item.secret) env['ANTHROPIC_WORK_SECRET'] = item.secret;
  const environmentKeyPassed = decodeWorkSecret(item.secret).status !== 'token';
  if (environmentKeyPassed) env['ANTHROPIC_ENVIRONMENT_KEY'] = input.environmentKey;
  return { env, environmentKeyPassed };
}
