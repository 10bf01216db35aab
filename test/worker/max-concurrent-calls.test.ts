// Pins that `maxConcurrentCalls` reaches the SDK's session runner as the official worker passes it:
// left out at its default (1, the runner's own default), a count as given, `null` (no limit) as
// `null`; and that the installed runner takes what the worker passes. The SDK 1.16 runner reads it
// (and refuses a value below 1 itself); 1.14 and 1.15 accept and ignore it.
import { SessionToolRunner } from '@anthropic-ai/sdk/lib/tools/SessionToolRunner';
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { resolveWorkerOptions } from '../../src/worker/options.js';
import { runnerTuning } from '../../src/worker/work-item.js';

const client = new Anthropic({ apiKey: 'sk-test', baseURL: 'http://127.0.0.1:1' });

describe('maxConcurrentCalls reaches the runner', () => {
  const rows = [
    { description: 'the default (1) is left to the runner', option: {}, expected: {} },
    { description: 'a count is passed as given', option: { maxConcurrentCalls: 3 }, expected: { maxConcurrentCalls: 3 } },
    { description: 'null (no limit) is passed as null', option: { maxConcurrentCalls: null }, expected: { maxConcurrentCalls: null } },
    {
      description: 'beside the idle bound and the request options',
      option: { maxConcurrentCalls: 2, maxIdleMs: 500, requestOptions: { headers: { 'x-proxy': 'a' } } },
      expected: { maxConcurrentCalls: 2, maxIdleMs: 500, requestOptions: { headers: { 'x-proxy': 'a' } } },
    },
  ];
  for (const row of rows) {
    it(row.description, () => {
      const tuning = runnerTuning(resolveWorkerOptions({ client, ...row.option }));
      expect(tuning).toEqual(row.expected);
      // The installed runner takes it as it is passed.
      expect(() => new SessionToolRunner('sesn_x', { client, tools: [], ...tuning })).not.toThrow();
    });
  }
});
