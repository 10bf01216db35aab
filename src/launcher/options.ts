import { z } from 'zod/v3';
import type Anthropic from '@anthropic-ai/sdk';
import { LAUNCHER_DEFAULTS } from '../internal/defaults.js';
import type { Logger } from '../internal/logger.js';
import { isObject, looksLikeClient, looksLikeLogger, parseOptions } from '../internal/option-schema.js';
import { ENV_VAR_NAME, SANDBOX_ENV_VARS } from './sandbox-env.js';

/** Most sandboxes one launcher runs at once. */
export const LAUNCHER_CONCURRENCY_MAX = LAUNCHER_DEFAULTS.concurrencyMax;
/** Default delay between the SIGTERM and the SIGKILL of a sandbox still running after close(). */
export const KILL_AFTER_DEFAULT_MS = LAUNCHER_DEFAULTS.killAfterMs;

/**
 * Options of {@link Launcher}. They are validated when it is made: every problem in one {@link ConfigError},
 * unknown keys refused.
 */
export interface LauncherOptions {
  /** An SDK client; polls go through a copy keyed with `environmentKey`, and its base URL is handed to sandboxes. */
  client: Anthropic;
  /**
   * The self-hosted environment whose queue the launcher claims from. Required: `undefined` (an unset
   * `process.env.ANTHROPIC_ENVIRONMENT_ID`) is accepted by the type and refused at once, naming the variable.
   */
  environmentId: string | undefined;
  /**
   * The environment key. Polls and acks use it. A sandbox receives it (as `ANTHROPIC_ENVIRONMENT_KEY`,
   * never on a command line) only for an item whose secret yields no sessions token. Required, as `environmentId`.
   */
  environmentKey: string | undefined;
  /**
   * Shell command (run with `/bin/sh -c`) that starts one sandbox for one item and **returns when
   * that sandbox has exited**, e.g. `docker run --rm -e ANTHROPIC_WORK_ID … managed-agents-worker handle`
   * or a script that creates a Kubernetes Job and waits for it. The item's `ANTHROPIC_*` variables are
   * in its environment.
   */
  command: string;
  /** Sandboxes running at once. Default 1, at most 256. */
  concurrency?: number;
  /**
   * Where the sandbox command's variables are read from: the allow-listed ones
   * (`SANDBOX_BASE_ENV_VARS`: PATH, HOME, locale, …) and those named in `passEnv`. Nothing else
   * from it reaches a sandbox. Default `process.env`.
   */
  env?: Readonly<Record<string, string | undefined>>;
  /**
   * Names of further variables copied from `env` into every sandbox command (e.g. `DOCKER_HOST`,
   * `KUBECONFIG`). Default none. The item variables (`ANTHROPIC_WORK_ID`, …) cannot be named: the
   * launcher sets them per item.
   */
  passEnv?: readonly string[];
  /** Where sandbox output goes. Default `inherit` (this process's stdout/stderr). */
  stdio?: 'inherit' | 'ignore';
  /** After close(), sandboxes still running this long after their SIGTERM get SIGKILL, in ms. Default 60 000. */
  killAfterMs?: number;
  /** Sent as `Anthropic-Worker-ID` on polls. Default `<host name>-<uuid>` (`os.hostname()`). */
  workerId?: string;
  /** A pino logger. Default: warnings and errors to stderr. */
  logger?: Logger;
}

export interface ResolvedLauncherOptions {
  client: Anthropic;
  environmentId: string;
  environmentKey: string;
  command: string;
  concurrency: number;
  env: Readonly<Record<string, string | undefined>>;
  passEnv: readonly string[];
  stdio: 'inherit' | 'ignore';
  killAfterMs: number;
  workerId: string | undefined;
  logger: Logger | undefined;
}

const nonEmpty = z.string().min(1);
const ITEM_VARS: ReadonlySet<string> = new Set(SANDBOX_ENV_VARS);

const schema = z
  .object({
    client: z.custom<Anthropic>(looksLikeClient),
    environmentId: nonEmpty,
    environmentKey: nonEmpty,
    command: z.string().trim().min(1),
    concurrency: z.number().int().min(1).max(LAUNCHER_CONCURRENCY_MAX).optional(),
    env: z.custom<Readonly<Record<string, string | undefined>>>(isObject).optional(),
    passEnv: z
      .array(z.string())
      .superRefine((names, ctx) => {
        for (const name of names) {
          if (!ENV_VAR_NAME.test(name)) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(name)} is not a variable name` });
          else if (ITEM_VARS.has(name)) ctx.addIssue({ code: 'custom', message: `${name} is set per item by the launcher; remove it` });
        }
      })
      .optional(),
    stdio: z.enum(['inherit', 'ignore']).optional(),
    killAfterMs: z.number().int().min(0).max(LAUNCHER_DEFAULTS.killAfterMaxMs).optional(),
    workerId: nonEmpty.optional(),
    logger: z.custom<Logger>(looksLikeLogger).optional(),
  })
  .strict()
  .superRefine((o, ctx) => {
    // A command line shows in `ps` and in every sandbox's /proc/<pid>/cmdline.
    if (o.command.includes(o.environmentKey)) {
      ctx.addIssue({
        code: 'custom',
        path: ['command'],
        message:
          'the command holds the environment key, which would show in ps; remove it (a sandbox that needs the key gets it as ANTHROPIC_ENVIRONMENT_KEY)',
      });
    }
  });

const EXPECTED: Record<string, string> = {
  client: 'an Anthropic client (new Anthropic({ ... }))',
  environmentId: 'a non-empty string (env_...); the CLI reads ANTHROPIC_ENVIRONMENT_ID',
  environmentKey: 'a non-empty string; the CLI reads ANTHROPIC_ENVIRONMENT_KEY',
  command: 'a non-empty shell command (the CLI reads --on-work)',
  concurrency: `an integer from 1 to ${LAUNCHER_CONCURRENCY_MAX}`,
  env: 'an object of environment variables',
  passEnv: 'an array of environment variable names',
  stdio: '"inherit" or "ignore"',
  killAfterMs: `an integer number of milliseconds from 0 to ${LAUNCHER_DEFAULTS.killAfterMaxMs}`,
  workerId: 'a non-empty string',
  logger: 'a pino logger',
};

/** Validate the Launcher's options and fill in defaults; every problem in one {@link ConfigError}. */
export function resolveLauncherOptions(input: unknown): ResolvedLauncherOptions {
  const o = parseOptions(schema, input, {
    owner: 'Launcher',
    expected: EXPECTED,
    secretKeys: new Set(['environmentKey']),
    variables: { environmentId: 'ANTHROPIC_ENVIRONMENT_ID', environmentKey: 'ANTHROPIC_ENVIRONMENT_KEY' },
  });
  return {
    client: o.client,
    environmentId: o.environmentId,
    environmentKey: o.environmentKey,
    command: o.command,
    concurrency: o.concurrency ?? LAUNCHER_DEFAULTS.concurrency,
    env: o.env ?? process.env,
    passEnv: [...new Set(o.passEnv ?? [])],
    stdio: o.stdio ?? 'inherit',
    killAfterMs: o.killAfterMs ?? KILL_AFTER_DEFAULT_MS,
    workerId: o.workerId,
    logger: o.logger,
  };
}
