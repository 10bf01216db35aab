import { Option, type Command as CommanderCommand, type OptionValues } from 'commander';
import { firstSet } from './flags.js';
import type { CommandIo } from './io.js';
import { readSecretFile } from './secrets.js';
import { UsageError } from './usage-error.js';

export const ENVIRONMENT_KEY_VARIABLE = 'ANTHROPIC_ENVIRONMENT_KEY';
export const WORK_SECRET_VARIABLE = 'ANTHROPIC_WORK_SECRET';

/**
 * `--environment-key-file`: the environment key never goes on a command line (anyone on the host
 * reads command lines in `ps` and `/proc/<pid>/cmdline`). `--environment-key` is refused with the
 * way to migrate.
 */
export function addEnvironmentKeyFlags(cmd: CommanderCommand): void {
  cmd
    .option(
      '--environment-key-file <path>',
      `file holding the environment key; /dev/stdin reads it from a pipe (default: ${ENVIRONMENT_KEY_VARIABLE})`,
    )
    .addOption(new Option('--environment-key <key>').hideHelp());
}

/** `--work-secret-file`, for `handle`: the work item's secret from a file instead of `ANTHROPIC_WORK_SECRET`. */
export function addWorkSecretFlag(cmd: CommanderCommand): void {
  cmd.option(
    '--work-secret-file <path>',
    `file holding the work item's secret; /dev/stdin reads it from a pipe (default: ${WORK_SECRET_VARIABLE})`,
  );
}

/** The environment key from `--environment-key-file`, else `ANTHROPIC_ENVIRONMENT_KEY`; `undefined` when neither is set. */
export function environmentKeyFrom(flags: OptionValues, io: Pick<CommandIo, 'env'>): string | undefined {
  if (flags['environmentKey'] !== undefined) {
    throw new UsageError(
      `--environment-key is not accepted: a key on the command line shows in ps and /proc/<pid>/cmdline. ` +
        `Write the key into a file only you can read and pass --environment-key-file <path>, or set ${ENVIRONMENT_KEY_VARIABLE}`,
    );
  }
  const file = flags['environmentKeyFile'] as string | undefined;
  if (file !== undefined) return readSecretFile('environment-key-file', file);
  return firstSet(io.env[ENVIRONMENT_KEY_VARIABLE]);
}

/** The work secret from `--work-secret-file`, else `ANTHROPIC_WORK_SECRET`; `undefined` when neither is set. */
export function workSecretFrom(flags: OptionValues, io: Pick<CommandIo, 'env'>): string | undefined {
  const file = flags['workSecretFile'] as string | undefined;
  if (file !== undefined) return readSecretFile('work-secret-file', file);
  return firstSet(io.env[WORK_SECRET_VARIABLE]);
}
