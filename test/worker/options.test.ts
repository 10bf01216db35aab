// Pins option validation: official names accepted with their defaults, every bad value rejected at
// construction with a ConfigError line naming the option, the value and the accepted range, the
// removed `unrestrictedPaths` explained, credentials never echoed, and Windows refused (by the
// worker's constructor itself).
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { ConfigError, PlatformError } from '../../src/errors.js';
import { monotonicClock } from '../../src/internal/clock.js';
import { ManualClock } from '../../src/internal/manual-clock.js';
import { EnvironmentWorker } from '../../src/worker/environment-worker.js';
import { assertPosixPlatform, resolveWorkerOptions } from '../../src/worker/options.js';

const client = new Anthropic({ apiKey: 'sk-test', baseURL: 'http://127.0.0.1:1' });

function issuesOf(input: Record<string, unknown>): string[] {
  try {
    resolveWorkerOptions({ client, ...input });
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return [...(e as ConfigError).issues];
  }
  throw new Error('expected a ConfigError');
}

describe('resolveWorkerOptions', () => {
  it('fills the documented defaults', () => {
    const o = resolveWorkerOptions({ client });
    expect(o.memorySyncIntervalMs).toBe(15_000);
    expect(o.memorySyncDeletions).toBe('enabled');
    expect(o.concurrency).toBe(1);
    expect(o.finalFlushMs).toBe(30_000);
    expect(o.memoryDeleteAfterMs).toBe(30_000);
    expect(o.pathWaitMs).toBe(60_000);
    expect(o.workdir).toBe(process.cwd());
    expect(o.maxConcurrentCalls).toBe(1);
  });

  it('takes maxConcurrentCalls as the official worker does: a count of at least 1, or null for no limit', () => {
    expect(resolveWorkerOptions({ client, maxConcurrentCalls: 4 }).maxConcurrentCalls).toBe(4);
    expect(resolveWorkerOptions({ client, maxConcurrentCalls: 1 }).maxConcurrentCalls).toBe(1);
    expect(resolveWorkerOptions({ client, maxConcurrentCalls: null }).maxConcurrentCalls).toBeNull();
  });

  it('runs on the monotonic clock unless a clock is injected, and keeps the injected one', () => {
    expect(resolveWorkerOptions({ client }).clock).toBe(monotonicClock);
    const clock = new ManualClock();
    expect(resolveWorkerOptions({ client, clock }).clock).toBe(clock);
  });

  it('leaves the test-only clock out of the accepted options it lists', () => {
    const line = issuesOf({ memorySyncInterval: 5000 })[0]!;
    expect(line).toContain('mountTimeoutMs');
    expect(line).not.toContain('clock');
  });

  it('keeps null as "memory off"', () => {
    expect(resolveWorkerOptions({ client, memorySyncIntervalMs: null }).memorySyncIntervalMs).toBeNull();
  });

  const rejected = [
    {
      description: 'a sync interval under the minimum',
      input: { memorySyncIntervalMs: 1000 },
      line: 'memorySyncIntervalMs: expected a number >= 5000 or null, got 1000',
    },
    {
      description: 'an unknown deletion mode',
      input: { memorySyncDeletions: 'always' },
      line: 'memorySyncDeletions: expected "enabled", "log_only" or "disabled", got "always"',
    },
    { description: 'concurrency zero', input: { concurrency: 0 }, line: 'concurrency: expected an integer from 1 to 64, got 0' },
    { description: 'concurrency above the cap', input: { concurrency: 65 }, line: 'concurrency: expected an integer from 1 to 64, got 65' },
    {
      description: 'a fractional concurrency',
      input: { concurrency: 1.5 },
      line: 'concurrency: expected an integer from 1 to 64, got 1.5',
    },
    {
      description: 'a negative final flush bound',
      input: { finalFlushMs: -1 },
      line: 'finalFlushMs: expected an integer number of milliseconds from 1 to 600000',
    },
    {
      description: 'a final flush bound of 0, which would cut off every final sync',
      input: { finalFlushMs: 0 },
      line: 'finalFlushMs: expected an integer number of milliseconds from 1 to 600000 (0 would cut off every final sync), got 0',
    },
    {
      description: 'a negative delete wait',
      input: { memoryDeleteAfterMs: -5 },
      line: 'memoryDeleteAfterMs: expected an integer number of milliseconds from 0 to 86400000, got -5',
    },
    {
      description: 'tools that are neither array nor function',
      input: { tools: 'bash' },
      line: 'tools: expected an array of runnable tools or a function (ctx) => tools, got "bash"',
    },
    { description: 'a logger that is not pino-like', input: { logger: console }, line: 'logger: expected a pino logger, got an object' },
    {
      description: 'a client that is not an Anthropic client',
      input: { client: {} },
      line: 'client: expected an Anthropic client (new Anthropic({ ... })), got an object',
    },
    {
      description: 'maxConcurrentCalls zero',
      input: { maxConcurrentCalls: 0 },
      line: 'maxConcurrentCalls: expected an integer of at least 1, or null for no limit, got 0',
    },
    {
      description: 'a negative maxConcurrentCalls',
      input: { maxConcurrentCalls: -2 },
      line: 'maxConcurrentCalls: expected an integer of at least 1, or null for no limit, got -2',
    },
    {
      description: 'a fractional maxConcurrentCalls',
      input: { maxConcurrentCalls: 2.5 },
      line: 'maxConcurrentCalls: expected an integer of at least 1, or null for no limit, got 2.5',
    },
    {
      description: 'maxConcurrentCalls as a string',
      input: { maxConcurrentCalls: '2' },
      line: 'maxConcurrentCalls: expected an integer of at least 1, or null for no limit, got "2"',
    },
    {
      description: 'an infinite maxConcurrentCalls (null means no limit)',
      input: { maxConcurrentCalls: Infinity },
      line: 'maxConcurrentCalls: expected an integer of at least 1, or null for no limit, got Infinity',
    },
    { description: 'a typo in an option name', input: { memorySyncInterval: 5000 }, line: 'memorySyncInterval: unknown option' },
    {
      description: 'a clock without schedule()',
      input: { clock: { now: () => 0 } },
      line: 'clock: expected a clock { now(), schedule(ms, callback) }, got an object',
    },
  ];
  for (const row of rejected) {
    it(`rejects ${row.description}`, () => {
      const issues = issuesOf(row.input);
      expect(issues.some((l) => l.startsWith(row.line))).toBe(true);
    });
  }

  it('explains the migration for the removed unrestrictedPaths option', () => {
    const issues = issuesOf({ unrestrictedPaths: true });
    expect(issues[0]).toMatch(/^unrestrictedPaths: this official option was removed/);
    expect(issues[0]).toMatch(/allowedRoots/);
  });

  it('never echoes an environment key, even a wrong one', () => {
    try {
      resolveWorkerOptions({ client, environmentKey: 42 as unknown as string, concurrency: 0 });
      expect.unreachable();
    } catch (e) {
      expect((e as Error).message).toContain('environmentKey: expected a non-empty string, got number');
    }
    try {
      resolveWorkerOptions({ client, environmentKey: 'env-key-very-secret', concurrency: 0 });
      expect.unreachable();
    } catch (e) {
      expect((e as Error).message).not.toContain('env-key-very-secret');
    }
  });

  it('refuses in the constructor an id and a key passed as undefined (unset variables), naming both and their variables in one message', () => {
    const env: Record<string, string | undefined> = {};
    let err: unknown;
    try {
      new EnvironmentWorker({
        client,
        environmentId: env['ANTHROPIC_ENVIRONMENT_ID'],
        environmentKey: env['ANTHROPIC_ENVIRONMENT_KEY'],
        concurrency: 0,
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues).toEqual([
      'concurrency: expected an integer from 1 to 64, got 0',
      'environmentId: expected a non-empty string, got undefined (is ANTHROPIC_ENVIRONMENT_ID set?); leave it out only for a worker used through handleItem()',
      'environmentKey: expected a non-empty string, got undefined (is ANTHROPIC_ENVIRONMENT_KEY set?); leave it out only for a worker used through handleItem()',
    ]);
    // Left out, they are not required until run() (a handleItem-only worker); run() names both.
    expect(() => new EnvironmentWorker({ client })).not.toThrow();
  });

  it('run() without an id and a key names both and their variables', async () => {
    const err = await new EnvironmentWorker({ client }).run().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues).toEqual([
      'environmentId: expected a non-empty string, got undefined (is ANTHROPIC_ENVIRONMENT_ID set?)',
      'environmentKey: expected a non-empty string, got undefined (is ANTHROPIC_ENVIRONMENT_KEY set?)',
    ]);
  });

  it('puts one line per problem in the message', () => {
    try {
      resolveWorkerOptions({ client, concurrency: 0, memorySyncIntervalMs: 10 });
      expect.unreachable();
    } catch (e) {
      const msg = (e as Error).message;
      expect(msg).toContain('\n  concurrency:');
      expect(msg).toContain('\n  memorySyncIntervalMs:');
    }
  });
});

describe('assertPosixPlatform', () => {
  it('refuses Windows with a PlatformError', () => {
    expect(() => assertPosixPlatform('win32')).toThrow(PlatformError);
  });
  it('is what the EnvironmentWorker constructor runs first: on Windows it throws before reading any option', () => {
    const platform = Object.getOwnPropertyDescriptor(process, 'platform')!;
    Object.defineProperty(process, 'platform', { ...platform, value: 'win32' });
    try {
      expect(() => new EnvironmentWorker({ client })).toThrow(PlatformError);
    } finally {
      Object.defineProperty(process, 'platform', platform);
    }
    expect(() => new EnvironmentWorker({ client })).not.toThrow();
  });
  it('accepts Linux and macOS', () => {
    expect(() => assertPosixPlatform('linux')).not.toThrow();
    expect(() => assertPosixPlatform('darwin')).not.toThrow();
  });
});
