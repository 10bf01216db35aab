// Pins how serveMetrics refuses bad options before it opens a port: every problem in one
// ConfigError (one line each, naming the option, what it accepts and what it got), unknown keys
// refused, an out-of-range port a ConfigError rather than the socket's RangeError, a worker or a
// work queue required, and the environment key never echoed.
import { EventEmitter } from 'node:events';
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { serveMetrics, type MetricsServerOptions } from '../../src/metrics/index.js';
import { parseMetricsServerOptions } from '../../src/metrics/options.js';

const worker = Object.assign(new EventEmitter(), { activeSessions: 0, closing: false, lastPollOkAt: undefined });
const client = new Anthropic({ apiKey: 'sk-ant-api-x', baseURL: 'http://127.0.0.1:9' });

function problems(input: unknown): string[] {
  try {
    parseMetricsServerOptions(input);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).code).toBe('MAW_CONFIG');
    return [...(e as ConfigError).issues];
  }
  return [];
}

describe('serveMetrics options', () => {
  const rows: Array<{ description: string; input: unknown; lines: RegExp[] }> = [
    { description: 'a negative port', input: { worker, port: -1 }, lines: [/^port: expected an integer from 0 to 65535, got -1$/] },
    {
      description: 'a port above 65535',
      input: { worker, port: 70_000 },
      lines: [/^port: expected an integer from 0 to 65535, got 70000$/],
    },
    { description: 'a port that is not an integer', input: { worker, port: 80.5 }, lines: [/^port: .* got 80.5$/] },
    { description: 'no port', input: { worker }, lines: [/^port: expected an integer from 0 to 65535, got undefined$/] },
    {
      description: 'an unknown key',
      input: { worker, port: 0, prot: 9000 },
      lines: [/^prot: unknown option; accepted options are worker, workQueue, port, /],
    },
    {
      description: 'neither a worker nor a work queue',
      input: { port: 0 },
      lines: [/^worker: expected an EnvironmentWorker .*: a worker, or workQueue to export the queue depth alone$/],
    },
    { description: 'something that is not a worker', input: { worker: {}, port: 0 }, lines: [/^worker: expected an EnvironmentWorker/] },
    {
      description: 'a prefix Prometheus refuses',
      input: { worker, port: 0, prefix: 'maw-' },
      lines: [/^prefix: expected a Prometheus metric name prefix .*, got "maw-"$/],
    },
    {
      description: 'a zero readyWithinMs',
      input: { worker, port: 0, readyWithinMs: 0 },
      lines: [/^readyWithinMs: expected a positive integer number of milliseconds, got 0$/],
    },
    {
      description: 'a work queue without an environment id',
      input: { port: 0, workQueue: { client } },
      lines: [/^workQueue: expected \{ client, environmentId, /],
    },
    {
      description: 'a work queue with an unknown key',
      input: { port: 0, workQueue: { client, environmentId: 'env_1', envKey: 'k' } },
      lines: [/^workQueue: .* and no other key, got an object: unknown key envKey$/],
    },
    {
      description: 'a work queue cache shorter than a second',
      input: { port: 0, workQueue: { client, environmentId: 'env_1', maxAgeMs: 10 } },
      lines: [/^workQueue: /],
    },
    {
      description: 'several problems at once',
      input: { port: -1, host: '', processMetrics: 'yes', extra: true },
      lines: [/^port: /, /^host: /, /^processMetrics: expected a boolean, got "yes"$/, /^extra: unknown option/, /^worker: /],
    },
  ];
  it.each(rows)('refuses $description in one ConfigError', ({ input, lines }) => {
    const got = problems(input);
    expect(got).toHaveLength(lines.length);
    for (const re of lines)
      expect(
        got.some((l) => re.test(l)),
        `${String(re)} in ${JSON.stringify(got)}`,
      ).toBe(true);
  });

  it('accepts a worker alone, a work queue alone, and both', () => {
    expect(problems({ worker, port: 0 })).toEqual([]);
    expect(problems({ port: 9464, workQueue: { client, environmentId: 'env_1', environmentKey: 'k', maxAgeMs: 5_000 } })).toEqual([]);
    expect(problems({ worker, port: 0, host: '127.0.0.1', workQueue: { client, environmentId: 'env_1' } })).toEqual([]);
  });

  it('never echoes the environment key of a refused work queue', () => {
    const got = problems({ port: 0, workQueue: { client, environmentId: 'env_1', environmentKey: 'sk-env-very-secret', maxAgeMs: 1 } });
    expect(got.join('\n')).not.toContain('sk-env-very-secret');
  });

  it('rejects serveMetrics({ port: -1 }) with a ConfigError before opening a port', async () => {
    const err = await serveMetrics({ worker, port: -1 } as unknown as MetricsServerOptions).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('invalid serveMetrics options');
    expect((err as Error).message).toContain('port: expected an integer from 0 to 65535, got -1');
  });
});
