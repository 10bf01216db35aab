import Anthropic from '@anthropic-ai/sdk';
import { ConfigError } from '../errors.js';
import { recoverLeftovers } from '../memory/mount/recovery.js';
import { sweepSandboxCgroups } from '../sandbox/limits/cgroup-sweep.js';
import { defaultStateDir } from '../memory/disk/state-dir.js';
import { addLogFlags, cliLogger, LOG_ENVIRONMENT_ROW } from './cli-logger.js';
import { customHeadersFrom, headersOption } from './custom-headers.js';
import type { Command } from './command.js';
import { COMMON_EXIT_ROWS, EXIT } from './exit-codes.js';
import { firstSet } from './flags.js';
import { readSecretFile } from './secrets.js';

export const recoverCommand: Command = {
  name: 'recover',
  summary: 'save the memory folders a killed worker left behind (uploads, copies, removes)',
  description: `Saves the memory folders a worker left behind when it was killed (kill -9, power loss): for each
journal entry in the state folder whose owner process is gone, the folder is reconciled with its
store as a session's final sync would (edits uploaded with preconditions; the store wins a
conflict and the local bytes are kept as a copy; only deletions a sync already saw are carried
out), every file that still differs is copied to the state folder, then the folder is removed.
Folders of a worker that still runs are never touched. The sandbox cgroups such a worker left
(see sandbox.limits) are killed and removed too. Prints one line per folder.
Needs an API key (ANTHROPIC_API_KEY, or --api-key-file): the memory endpoints refuse the
environment key. Without it, the next session of each store adopts its leftover by itself;
--dry-run lists the leftovers without a key (the store is then not read).`,
  environment: [
    ['ANTHROPIC_API_KEY', 'API key, when --api-key-file is not given'],
    ['ANTHROPIC_BASE_URL', 'API base URL, when --base-url is not given'],
    ['XDG_STATE_HOME', 'the default state folder is $XDG_STATE_HOME/managed-agents-worker'],
    LOG_ENVIRONMENT_ROW,
  ],
  exitCodes: [
    [EXIT.OK, 'every leftover folder was handled, or there was none'],
    COMMON_EXIT_ROWS.unexpected,
    COMMON_EXIT_ROWS.usage,
    [EXIT.CONFIG, 'no API key (outside --dry-run), or the key file could not be read'],
  ],
  flags(cmd) {
    cmd
      .option(
        '--state-dir <dir>',
        "the worker's state folder (default: $XDG_STATE_HOME/managed-agents-worker, else ~/.local/state/managed-agents-worker)",
      )
      .option('--dry-run', 'print what would be done; upload, copy and remove nothing')
      .option('--api-key-file <path>', 'file holding the API key; /dev/stdin reads it from a pipe (default: ANTHROPIC_API_KEY)')
      .option('--base-url <url>', 'API base URL (default: ANTHROPIC_BASE_URL, else https://api.anthropic.com)');
    addLogFlags(cmd);
  },
  async run(flags, io) {
    const keyFile = flags['apiKeyFile'] as string | undefined;
    const apiKey = keyFile !== undefined ? readSecretFile('api-key-file', keyFile) : firstSet(io.env['ANTHROPIC_API_KEY']);
    const dryRun = flags['dryRun'] === true;
    // A dry run lists the leftovers from the state folder alone; uploading needs the key.
    if (!apiKey && !dryRun) {
      throw new ConfigError(
        'recover needs an API key: set ANTHROPIC_API_KEY or pass --api-key-file (the memory endpoints refuse the environment key); --dry-run lists the leftovers without one',
        ['apiKey: expected ANTHROPIC_API_KEY or --api-key-file, got nothing'],
      );
    }
    const logger = await cliLogger(flags, io);
    const client = apiKey
      ? new Anthropic({
          apiKey,
          baseURL: firstSet(flags['baseUrl'] as string | undefined, io.env['ANTHROPIC_BASE_URL']) ?? null,
          ...headersOption(customHeadersFrom(io.env)),
        })
      : undefined;
    const stateDir = (flags['stateDir'] as string | undefined) ?? defaultStateDir(io.env);
    const lines = await recoverLeftovers({ client, stateDir, logger, dryRun });
    if (lines.length === 0) io.stdout('no leftover folder of a worker that is gone\n');
    for (const line of lines) io.stdout(`${line.text}\n`);
    // The sandbox cgroups of a worker that is gone: whatever still runs in them is killed.
    if (!dryRun) for (const dir of await sweepSandboxCgroups(stateDir)) io.stdout(`removed the sandbox cgroup ${dir}\n`);
    return EXIT.OK;
  },
};
