// Pins createWebhookHandler's option validation: defaults filled in, every problem reported in one
// ConfigError (one `option: expected …, got …` line each), unknown keys refused, and neither the
// environment key nor the webhook secret ever echoed.
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { createWebhookHandler } from '../../src/webhook/index.js';
import { resolveWebhookHandlerOptions } from '../../src/webhook/options.js';

const client = new Anthropic({ apiKey: 'sk-test', baseURL: 'http://127.0.0.1:1' });
const worker = { handleItem: async () => ({ workId: 'w', sessionId: 's', status: 'completed' as const, durationMs: 0 }) };
const KEY = 'sk-ant-envkey-never-echo-31';
const WHSEC = 'whsec_bmV2ZXItZWNobw==';
const valid = { worker, client, webhookSecret: WHSEC, environmentId: 'env_1', environmentKey: KEY };

function configError(input: unknown): ConfigError {
  try {
    resolveWebhookHandlerOptions(input);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('createWebhookHandler options', () => {
  it('fills the documented defaults', () => {
    const o = resolveWebhookHandlerOptions(valid);
    expect(o).toMatchObject({ concurrency: 1, maxBodyBytes: 1024 * 1024, dedupeWindow: 10_000 });
    expect([...o.eventTypes]).toEqual(['session.status_run_started']);
  });

  const rejected = [
    { description: 'concurrency above the cap', input: { concurrency: 65 }, line: 'concurrency: expected an integer from 1 to 64, got 65' },
    {
      description: 'a zero body limit',
      input: { maxBodyBytes: 0 },
      line: 'maxBodyBytes: expected an integer number of bytes from 1 to 67108864, got 0',
    },
    { description: 'a fractional dedupe window', input: { dedupeWindow: 0.5 }, line: 'dedupeWindow: expected an integer >= 1, got 0.5' },
    {
      description: 'an empty event type list',
      input: { eventTypes: [] },
      line: 'eventTypes: expected a non-empty array of event types (session.status_run_started, ...), got an array',
    },
    {
      description: 'an empty environment id',
      input: { environmentId: '' },
      line: 'environmentId: expected a non-empty string (env_...), got ""',
    },
    {
      description: 'a worker without handleItem',
      input: { worker: {} },
      line: 'worker: expected an EnvironmentWorker (an object with handleItem), got an object',
    },
    {
      description: 'a typo in an option name',
      input: { maxBodySize: 10 },
      line: 'maxBodySize: unknown option; accepted options are worker, client',
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

  it('takes unset variables as they come (string | undefined type-checks) and names each missing one with its variable', () => {
    const env: Record<string, string | undefined> = {};
    let err: unknown;
    try {
      createWebhookHandler({
        worker,
        client,
        webhookSecret: env['ANTHROPIC_WEBHOOK_SIGNING_KEY'],
        environmentId: env['ANTHROPIC_ENVIRONMENT_ID'],
        environmentKey: env['ANTHROPIC_ENVIRONMENT_KEY'],
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues).toEqual([
      'webhookSecret: expected a non-empty string (whsec_...), got undefined (is ANTHROPIC_WEBHOOK_SIGNING_KEY set?)',
      'environmentId: expected a non-empty string (env_...), got undefined (is ANTHROPIC_ENVIRONMENT_ID set?)',
      'environmentKey: expected a non-empty string, got undefined (is ANTHROPIC_ENVIRONMENT_KEY set?)',
    ]);
  });

  it('reports every problem at once in one ConfigError, from createWebhookHandler itself', () => {
    let err: unknown;
    try {
      createWebhookHandler({ ...valid, concurrency: 0, maxBodyBytes: -1, environmentId: '', retries: 3 } as never);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues.map((l) => l.split(':')[0]).sort()).toEqual([
      'concurrency',
      'environmentId',
      'maxBodyBytes',
      'retries',
    ]);
    expect((err as ConfigError).message).toMatch(/^invalid createWebhookHandler options:\n/);
  });

  it('never echoes the environment key or the webhook secret', () => {
    const err = configError({ ...valid, environmentKey: [KEY], webhookSecret: { WHSEC }, concurrency: 0 });
    expect(err.issues).toContain('environmentKey: expected a non-empty string, got object');
    expect(err.issues).toContain('webhookSecret: expected a non-empty string (whsec_...), got object');
    expect(err.message).not.toContain(KEY);
    expect(err.message).not.toContain(WHSEC);
  });
});
