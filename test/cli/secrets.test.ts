// Pins how the CLI takes credentials: a --*-file flag yields the file's one line (trailing line
// break dropped); a missing, empty, multi-line or spaced file is refused with a ConfigError that
// names the flag and the path but never the content; and every ANTHROPIC_* variable (any letter
// case) holding KEY, SECRET or TOKEN leaves the given environment while the snapshot keeps it; ids,
// the base URL and the SDK's own settings (ANTHROPIC_LOG) stay.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { readSecretFile, takeCredentials } from '../../src/cli/secrets.js';

let dir: string;
beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-secrets-'));
});
afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

describe('readSecretFile', () => {
  const accepted = [
    { description: 'a key with a trailing line break', content: 'sk-ant-env-1\n', value: 'sk-ant-env-1' },
    { description: 'a key with a CRLF line break', content: 'sk-ant-env-2\r\n', value: 'sk-ant-env-2' },
    { description: 'a key without a line break', content: 'sk-ant-env-3', value: 'sk-ant-env-3' },
  ];
  it.each(accepted)('reads $description', async ({ content, value }) => {
    const file = path.join(dir, 'ok');
    await fs.writeFile(file, content);
    expect(readSecretFile('environment-key-file', file)).toBe(value);
  });

  const refused = [
    { description: 'a missing file', content: undefined, reason: 'ENOENT' },
    { description: 'an empty file', content: '', reason: 'one credential on one line' },
    { description: 'two lines', content: 'sk-secret-one\nsk-secret-two\n', reason: 'one credential on one line' },
    { description: 'a value with a space', content: 'sk-secret one', reason: 'one credential on one line' },
  ];
  it.each(refused)('refuses $description, naming the flag and the path but not the content', async ({ content, reason }) => {
    const file = path.join(dir, `bad-${Math.random().toString(36).slice(2)}`);
    if (content !== undefined) await fs.writeFile(file, content);
    let caught: unknown;
    try {
      readSecretFile('work-secret-file', file);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    const message = (caught as ConfigError).message;
    expect(message).toContain('--work-secret-file');
    expect(message).toContain(file);
    expect(message).toContain(reason);
    expect(message).not.toContain('sk-secret');
  });

  it('refuses a folder', () => {
    expect(() => readSecretFile('environment-key-file', dir)).toThrow(/--environment-key-file .*not a regular file/);
  });
});

describe('takeCredentials', () => {
  it('removes every ANTHROPIC_* credential from the environment it is given and keeps it in the snapshot', () => {
    const before: NodeJS.ProcessEnv = {
      HOME: '/home/w',
      ANTHROPIC_ENVIRONMENT_KEY: 'k',
      ANTHROPIC_WORK_SECRET: 's',
      Anthropic_Api_Key: 'a',
      ANTHROPIC_AUTH_TOKEN: 't',
      ANTHROPIC_BASE_URL: 'http://x',
      ANTHROPIC_ENVIRONMENT_ID: 'env_1',
      ANTHROPIC_LOG: 'debug',
      MY_ANTHROPIC_KEY: 'not ours',
    };
    const env = { ...before };
    const { snapshot, scrub } = takeCredentials(env);
    expect(env).toEqual({
      HOME: '/home/w',
      ANTHROPIC_BASE_URL: 'http://x',
      ANTHROPIC_ENVIRONMENT_ID: 'env_1',
      ANTHROPIC_LOG: 'debug',
      MY_ANTHROPIC_KEY: 'not ours',
    });
    expect(snapshot).toEqual(before);
    // Only the process's own environment has a /proc block to overwrite.
    expect(scrub.status).toBe('unsupported');
  });
});

describe('a key piped on stdin', () => {
  it('is read through --environment-key-file /dev/stdin', async () => {
    const { spawnSync } = await import('node:child_process');
    const { CLI_MAIN, REPO_ROOT, childEnv } = await import('./spawn-cli.js');
    const run = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        CLI_MAIN,
        'doctor',
        '--offline',
        '--json',
        '--environment-key-file',
        '/dev/stdin',
        '--environment-id',
        'env_1',
        '--mount-parent',
        dir,
      ],
      { cwd: REPO_ROOT, env: childEnv({}), input: 'sk-from-a-pipe\n', encoding: 'utf8' },
    );
    const env = (JSON.parse(run.stdout) as { checks: Array<{ id: string; status: string }> }).checks.find((c) => c.id === 'env');
    expect(env?.status).toBe('pass');
    expect(run.stdout + run.stderr).not.toContain('sk-from-a-pipe');
  });
});
