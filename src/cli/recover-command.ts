import * as fsp from 'node:fs/promises';
import Anthropic from '@anthropic-ai/sdk';
import { ConfigError } from '../errors.js';
import { recoverLeftovers } from '../memory/recovery.js';
import { defaultStateDir } from '../memory/state-dir.js';
import type { Command } from './command.js';
import { cliLogger } from './cli-logger.js';
import { EXIT, EXIT_CODE_HELP } from './exit-codes.js';
import { firstSet, parseFlags } from './flags.js';
import { logLevelFlag } from './worker-flags.js';

const HELP = `Usage: managed-agents-worker recover [flags]

Saves the memory folders a worker left behind when it was killed (kill -9, power loss): for each
journal entry in the state folder whose owner process is gone, the folder is reconciled with its
store as a session's final sync would (edits uploaded with preconditions; the store wins a
conflict and the local bytes are kept as a copy; only deletions a sync already saw are carried
out), every file that still differs is copied to the state folder, then the folder is removed.
Folders of a worker that still runs are never touched. Prints one line per folder.
Needs an API key (ANTHROPIC_API_KEY, or --api-key-file): the memory endpoints refuse the
environment key. Without it, the next session of each store adopts its leftover by itself.

Flags:
  --state-dir <dir>         the worker's state folder (default ${defaultStateDir()})
  --dry-run                 print what would be done; upload, copy and remove nothing
  --api-key-file <file>     read the API key from this file (default: ANTHROPIC_API_KEY)
  --base-url <url>          default: ANTHROPIC_BASE_URL, else https://api.anthropic.com
  --log-level <level>       default: MAW_LOG_LEVEL, else info
  -h, --help                show this help

${EXIT_CODE_HELP}`;

export const recoverCommand: Command = {
  name: 'recover',
  summary: 'save the memory folders a killed worker left behind (uploads, copies, removes)',
  help: HELP,
  async run(argv, io) {
    const { values } = parseFlags('recover', argv, {
      'state-dir': { type: 'string' },
      'dry-run': { type: 'boolean' },
      'api-key-file': { type: 'string' },
      'base-url': { type: 'string' },
      'log-level': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    });
    if (values.help) {
      io.stdout(HELP + '\n');
      return EXIT.OK;
    }
    const keyFile = values['api-key-file'];
    const apiKey = keyFile !== undefined ? (await fsp.readFile(keyFile, 'utf8')).trim() : firstSet(io.env['ANTHROPIC_API_KEY']);
    if (!apiKey) {
      throw new ConfigError(
        'recover needs an API key: set ANTHROPIC_API_KEY or pass --api-key-file (the memory endpoints refuse the environment key)',
        ['apiKey: expected ANTHROPIC_API_KEY or --api-key-file, got nothing'],
      );
    }
    const logger = await cliLogger({ level: logLevelFlag(values, io.env), pretty: false, io });
    const client = new Anthropic({ apiKey, baseURL: firstSet(values['base-url'], io.env['ANTHROPIC_BASE_URL']) ?? null });
    const lines = await recoverLeftovers({
      client,
      stateDir: values['state-dir'] ?? defaultStateDir(io.env),
      logger,
      dryRun: values['dry-run'] ?? false,
    });
    if (lines.length === 0) io.stdout('no leftover folder of a worker that is gone\n');
    for (const line of lines) io.stdout(`${line.text}\n`);
    return EXIT.OK;
  },
};
