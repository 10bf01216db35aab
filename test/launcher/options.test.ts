// Pins the Launcher's option validation: defaults filled in, every problem reported in one
// ConfigError (one `option: expected …, got …` line each), unknown keys refused, item variables
// refused in passEnv, and the environment key never echoed.
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { Launcher } from '../../src/launcher/index.js';
import { resolveLauncherOptions } from '../../src/launcher/options.js';

const client = new Anthropic({ apiKey: 'sk-test', baseURL: 'http://127.0.0.1:1' });
const KEY = 'sk-ant-envkey-do-not-echo-77';
const valid = { client, environmentId: 'env_1', environmentKey: KEY, command: 'true' };

function configError(input: unknown): ConfigError {
  try {
    resolveLauncherOptions(input);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('Launcher options', () => {
  it('fills the documented defaults', () => {
    const o = resolveLauncherOptions(valid);
    expect(o).toMatchObject({ concurrency: 1, stdio: 'inherit', killAfterMs: 60_000, passEnv: [] });
    expect(o.env).toBe(process.env);
  });

  const rejected = [
    { description: 'concurrency zero', input: { concurrency: 0 }, line: 'concurrency: expected an integer from 1 to 256, got 0' },
    {
      description: 'a fractional concurrency',
      input: { concurrency: 2.5 },
      line: 'concurrency: expected an integer from 1 to 256, got 2.5',
    },
    {
      description: 'an empty command',
      input: { command: '  ' },
      line: 'command: expected a non-empty shell command (the CLI reads --on-work), got "  "',
    },
    {
      description: 'a missing environment id',
      input: { environmentId: undefined },
      line: 'environmentId: expected a non-empty string (env_...); the CLI reads ANTHROPIC_ENVIRONMENT_ID, got undefined',
    },
    { description: 'an unknown stdio', input: { stdio: 'pipe' }, line: 'stdio: expected "inherit" or "ignore", got "pipe"' },
    {
      description: 'a negative kill delay',
      input: { killAfterMs: -1 },
      line: 'killAfterMs: expected an integer number of milliseconds from 0 to 3600000, got -1',
    },
    {
      description: 'a passEnv that is not an array',
      input: { passEnv: 'DOCKER_HOST' },
      line: 'passEnv: expected an array of environment variable names, got "DOCKER_HOST"',
    },
    {
      description: 'a passEnv entry that is no variable name',
      input: { passEnv: ['DOCKER-HOST'] },
      line: 'passEnv: expected an array of environment variable names, got an array: "DOCKER-HOST" is not a variable name',
    },
    {
      description: 'an item variable in passEnv',
      input: { passEnv: ['ANTHROPIC_ENVIRONMENT_KEY'] },
      line: 'passEnv: expected an array of environment variable names, got an array: ANTHROPIC_ENVIRONMENT_KEY is set per item by the launcher; remove it',
    },
    { description: 'a logger that is not pino-like', input: { logger: console }, line: 'logger: expected a pino logger, got an object' },
    {
      description: 'a client that is not an Anthropic client',
      input: { client: {} },
      line: 'client: expected an Anthropic client (new Anthropic({ ... })), got an object',
    },
    {
      description: 'a typo in an option name',
      input: { concurency: 2 },
      line: 'concurency: unknown option; accepted options are client, environmentId',
    },
  ];
  for (const row of rejected) {
    it(`rejects ${row.description}`, () => {
      const err = configError({ ...valid, ...row.input });
      expect(
        err.issues.some((l) => l.startsWith(row.line)),
        `${row.line}\nnot in\n${err.issues.join('\n')}`,
      ).toBe(true);
    });
  }

  it('reports every problem at once, in one ConfigError, from the constructor too', () => {
    let err: unknown;
    try {
      new Launcher({ ...valid, concurrency: 0, stdio: 'pipe', killAfterMs: -5, extra: true } as never);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const issues = (err as ConfigError).issues;
    expect(issues.map((l) => l.split(':')[0]).sort()).toEqual(['concurrency', 'extra', 'killAfterMs', 'stdio']);
    expect((err as ConfigError).message).toMatch(/^invalid Launcher options:\n {2}/);
  });

  it('never echoes the environment key, even when it is the wrong type', () => {
    const wrongType = configError({ ...valid, environmentKey: 42 });
    expect(wrongType.issues).toContain('environmentKey: expected a non-empty string; the CLI reads ANTHROPIC_ENVIRONMENT_KEY, got number');
    const inAnArray = configError({ ...valid, environmentKey: [KEY] });
    expect(inAnArray.issues).toContain('environmentKey: expected a non-empty string; the CLI reads ANTHROPIC_ENVIRONMENT_KEY, got object');
    expect(inAnArray.message).not.toContain(KEY);
  });

  it('refuses options that are not an object', () => {
    expect(configError(undefined).issues).toEqual(['options: expected an object, got undefined']);
  });
});

describe('Launcher options: credentials on the command line', () => {
  it('refuses a command that holds the environment key, without echoing it', () => {
    const err = configError({ ...valid, command: `docker run -e KEY=${KEY} image` });
    expect(err.issues).toEqual([
      'command: expected a non-empty shell command (the CLI reads --on-work), got "docker run -e KEY=<redacted> image": the command holds the environment key, which would show in ps; remove it (a sandbox that needs the key gets it as ANTHROPIC_ENVIRONMENT_KEY)',
    ]);
    expect(err.message).not.toContain(KEY);
  });
});

describe('Launcher options: a long command holding the key', () => {
  it('masks the key before shortening the command, so not even a prefix shows', () => {
    // The key starts before the 57th character, where a long value is cut short.
    const prefix = 'docker run --rm -e ANTHROPIC_WORK_ID -e TOKEN=';
    expect(prefix.length).toBeLessThan(50);
    const err = configError({ ...valid, command: `${prefix}${KEY} image` });
    expect(err.message).not.toContain(KEY.slice(0, 6));
    expect(err.issues[0]).toContain(`got "${prefix}<redacted>`);
    expect(err.issues[0]).toContain('the command holds the environment key');
  });
});
