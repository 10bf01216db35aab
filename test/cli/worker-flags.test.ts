// Pins how the flags of `run` and `handle` become worker options: each ANTHROPIC_* variable is the
// default and its flag overrides it, the key comes from a file named by --environment-key-file (the
// key itself is never a flag), `--memory-sync-interval` takes milliseconds or `off` (memory off,
// `null`), `--memory-sync-deletions`, `--memory-delete-after`, `--workdir`, `--max-idle`, `--final-flush`, `--state-dir`,
// `--allowed-mount-root` (repeatable), `--worker-id` and `--max-concurrent-calls` (a count, or
// `unlimited` for `null`) reach the option of the same meaning, and an option not given stays unset (so
// the library's default applies).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addWorkerFlags, workerOptionsFromFlags } from '../../src/cli/worker-flags.js';

const ENV = {
  ANTHROPIC_ENVIRONMENT_ID: 'env_from_var',
  ANTHROPIC_ENVIRONMENT_KEY: 'key-from-var',
  ANTHROPIC_BASE_URL: 'http://127.0.0.1:7001',
};

let dir: string;
let keyFile: string;
beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-worker-flags-'));
  keyFile = path.join(dir, 'key');
  await fs.writeFile(keyFile, 'key-from-file\n', { mode: 0o600 });
});
afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

function optionsFor(argv: string[], env: NodeJS.ProcessEnv) {
  const cmd = new Command('run').exitOverride();
  addWorkerFlags(cmd);
  cmd.parse(argv, { from: 'user' });
  return workerOptionsFromFlags(cmd.opts(), { env, cwd: '/srv/cwd' });
}

describe('workerOptionsFromFlags', () => {
  const rows: Array<{ description: string; argv: () => string[]; env: NodeJS.ProcessEnv; expected: Record<string, unknown> }> = [
    {
      description: 'the variables alone give the environment, the key and the base URL; the workdir is the current folder',
      argv: () => [],
      env: ENV,
      expected: { environmentId: 'env_from_var', environmentKey: 'key-from-var', workdir: '/srv/cwd', baseURL: 'http://127.0.0.1:7001' },
    },
    {
      description: 'flags override the variables; the key file overrides the key variable, without its line break',
      argv: () => [
        '--environment-id',
        'env_from_flag',
        '--environment-key-file',
        keyFile,
        '--base-url',
        'http://127.0.0.1:7002',
        '--workdir',
        '/srv/work',
      ],
      env: ENV,
      expected: { environmentId: 'env_from_flag', environmentKey: 'key-from-file', workdir: '/srv/work', baseURL: 'http://127.0.0.1:7002' },
    },
    {
      description: 'an empty variable counts as unset',
      argv: () => [],
      env: { ANTHROPIC_ENVIRONMENT_ID: '', ANTHROPIC_ENVIRONMENT_KEY: '' },
      expected: { environmentId: undefined, environmentKey: undefined },
    },
    {
      description: 'a sync interval in milliseconds',
      argv: () => ['--memory-sync-interval', '5000'],
      env: ENV,
      expected: { memorySyncIntervalMs: 5000 },
    },
    {
      description: '"off" turns memory off (null)',
      argv: () => ['--memory-sync-interval', 'off'],
      env: ENV,
      expected: { memorySyncIntervalMs: null },
    },
    {
      description: 'the deletion mode, idle bound, flush bound, state dir and worker id',
      argv: () => [
        '--memory-sync-deletions',
        'log_only',
        '--max-idle',
        '2000',
        '--final-flush',
        '10000',
        '--state-dir',
        '/srv/state',
        '--worker-id',
        'w-1',
      ],
      env: ENV,
      expected: { memorySyncDeletions: 'log_only', maxIdleMs: 2000, finalFlushMs: 10000, stateDir: '/srv/state', workerId: 'w-1' },
    },
    {
      description: 'the calls of one session run at once',
      argv: () => ['--max-concurrent-calls', '4'],
      env: ENV,
      expected: { maxConcurrentCalls: 4 },
    },
    {
      description: '"unlimited" calls at once (null)',
      argv: () => ['--max-concurrent-calls', 'unlimited'],
      env: ENV,
      expected: { maxConcurrentCalls: null },
    },
    {
      description: 'the time a file must be gone before its memory is deleted',
      argv: () => ['--memory-delete-after', '0'],
      env: ENV,
      expected: { memoryDeleteAfterMs: 0 },
    },
    {
      description: 'the bytes of memory content a mount holds at once',
      argv: () => ['--memory-buffer-bytes', '8388608'],
      env: ENV,
      expected: { memoryBufferBytes: 8388608 },
    },
    {
      description: '--allowed-mount-root is repeatable; a relative folder is taken from the current folder',
      argv: () => ['--allowed-mount-root', '/mnt/memory', '--allowed-mount-root', 'mem'],
      env: ENV,
      expected: { allowedMountRoots: ['/mnt/memory', '/srv/cwd/mem'] },
    },
    {
      description: '--sandbox bwrap with its extras; relative paths are taken from the current folder',
      argv: () => [
        '--sandbox',
        'bwrap',
        '--sandbox-network',
        'none',
        '--sandbox-ro',
        '/opt/tools',
        '--sandbox-rw',
        'cache',
        '--sandbox-env',
        'GIT_AUTHOR_NAME',
      ],
      env: ENV,
      expected: {
        sandbox: {
          mode: 'bwrap',
          readOnlyPaths: ['/opt/tools'],
          readWritePaths: ['/srv/cwd/cache'],
          hidePaths: [],
          env: ['GIT_AUTHOR_NAME'],
          network: 'none',
        },
      },
    },
    {
      description: '--sandbox none',
      argv: () => ['--sandbox', 'none'],
      env: ENV,
      expected: { sandbox: 'none' },
    },
    {
      description: 'options not given stay unset, so the library defaults apply',
      argv: () => [],
      env: ENV,
      expected: {
        memorySyncIntervalMs: undefined,
        memorySyncDeletions: undefined,
        memoryDeleteAfterMs: undefined,
        memoryBufferBytes: undefined,
        maxIdleMs: undefined,
        maxConcurrentCalls: undefined,
        finalFlushMs: undefined,
        stateDir: undefined,
        workerId: undefined,
        allowedMountRoots: undefined,
      },
    },
  ];

  it.each(rows)('$description', ({ argv, env, expected }) => {
    const { client, ...opts } = optionsFor(argv(), env);
    const actual: Record<string, unknown> = { ...opts, baseURL: client.baseURL };
    for (const [key, value] of Object.entries(expected)) expect(actual[key], key).toStrictEqual(value);
  });

  it.each(['0', '-1', '1.5', 'many', ''])('--max-concurrent-calls %j is refused with what it accepts', (raw) => {
    expect(() => optionsFor(['--max-concurrent-calls', raw], ENV)).toThrow(/expected an integer of at least 1, or "unlimited"/);
  });

  it('without --sandbox: the default mode, with the key file hidden from every sandbox', () => {
    const { sandbox } = optionsFor(['--environment-key-file', keyFile], ENV);
    expect(sandbox).toStrictEqual({ mode: 'auto', readOnlyPaths: [], readWritePaths: [], hidePaths: [keyFile], env: [] });
  });

  it('authenticates the client with the key as a bearer token and no API key', () => {
    const { client } = optionsFor(['--environment-key-file', keyFile], ENV);
    expect(client.authToken).toBe('key-from-file');
    expect(client.apiKey).toBeNull();
  });
});
