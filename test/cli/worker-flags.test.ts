// Pins how the flags of `run` and `handle` become worker options: each ANTHROPIC_* variable is the
// default and its flag overrides it, `--memory-sync-interval` takes milliseconds or `off` (memory
// off, `null`), `--memory-sync-deletions`, `--workdir`, `--max-idle`, `--final-flush`, `--state-dir`
// `--allowed-mount-root` (repeatable) and `--worker-id` reach the option of the same meaning, and an option not given stays unset (so
// the library's default applies).
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../src/cli/io.js';
import { workerOptionsFromFlags, type WorkerFlagValues } from '../../src/cli/worker-flags.js';

function io(env: NodeJS.ProcessEnv): CliIo {
  return { env, cwd: '/srv/cwd', stdout: () => {}, stderr: () => {} };
}

const ENV = { ANTHROPIC_ENVIRONMENT_ID: 'env_from_var', ANTHROPIC_ENVIRONMENT_KEY: 'key-from-var', ANTHROPIC_BASE_URL: 'http://127.0.0.1:7001' };

describe('workerOptionsFromFlags', () => {
  const rows: Array<{ description: string; flags: WorkerFlagValues; env: NodeJS.ProcessEnv; expected: Record<string, unknown> }> = [
    {
      description: 'the variables alone give the environment, the key and the base URL; the workdir is the current folder',
      flags: {},
      env: ENV,
      expected: { environmentId: 'env_from_var', environmentKey: 'key-from-var', workdir: '/srv/cwd', baseURL: 'http://127.0.0.1:7001' },
    },
    {
      description: 'flags override the variables',
      flags: { 'environment-id': 'env_from_flag', 'environment-key': 'key-from-flag', 'base-url': 'http://127.0.0.1:7002', workdir: '/srv/work' },
      env: ENV,
      expected: { environmentId: 'env_from_flag', environmentKey: 'key-from-flag', workdir: '/srv/work', baseURL: 'http://127.0.0.1:7002' },
    },
    {
      description: 'an empty variable counts as unset',
      flags: {},
      env: { ANTHROPIC_ENVIRONMENT_ID: '', ANTHROPIC_ENVIRONMENT_KEY: '' },
      expected: { environmentId: undefined, environmentKey: undefined },
    },
    {
      description: 'a sync interval in milliseconds',
      flags: { 'memory-sync-interval': '5000' },
      env: ENV,
      expected: { memorySyncIntervalMs: 5000 },
    },
    {
      description: '"off" turns memory off (null)',
      flags: { 'memory-sync-interval': 'off' },
      env: ENV,
      expected: { memorySyncIntervalMs: null },
    },
    {
      description: 'the deletion mode, idle bound, flush bound, state dir and worker id',
      flags: { 'memory-sync-deletions': 'log_only', 'max-idle': '2000', 'final-flush': '10000', 'state-dir': '/srv/state', 'worker-id': 'w-1' },
      env: ENV,
      expected: { memorySyncDeletions: 'log_only', maxIdleMs: 2000, finalFlushMs: 10000, stateDir: '/srv/state', workerId: 'w-1' },
    },
    {
      description: '--allowed-mount-root is repeatable; a relative folder is taken from the current folder',
      flags: { 'allowed-mount-root': ['/mnt/memory', 'mem'] },
      env: ENV,
      expected: { allowedMountRoots: ['/mnt/memory', '/srv/cwd/mem'] },
    },
    {
      description: 'options not given stay unset, so the library defaults apply',
      flags: {},
      env: ENV,
      expected: { memorySyncIntervalMs: undefined, memorySyncDeletions: undefined, maxIdleMs: undefined, finalFlushMs: undefined, stateDir: undefined, workerId: undefined, allowedMountRoots: undefined },
    },
  ];

  it.each(rows)('$description', ({ flags, env, expected }) => {
    const { client, ...opts } = workerOptionsFromFlags(flags, io(env));
    const actual: Record<string, unknown> = { ...opts, baseURL: client.baseURL };
    for (const [key, value] of Object.entries(expected)) expect(actual[key], key).toStrictEqual(value);
  });

  it('authenticates the client with the key as a bearer token and no API key', () => {
    const { client } = workerOptionsFromFlags({ 'environment-key': 'key-from-flag' }, io(ENV));
    expect(client.authToken).toBe('key-from-flag');
    expect(client.apiKey).toBeNull();
  });
});
