// Pins that `maxConcurrentCalls` reaches the SDK's session runner as the official worker passes it:
// left out at its default (1, the runner's own default), a count as given, `null` (no limit) as
// `null`. The SDK 1.16 runner reads it; 1.14 and 1.15 accept and ignore it.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { harness, type Harness } from './helpers.js';

const seen = vi.hoisted(() => [] as Array<{ given: boolean; value: unknown }>);

vi.mock('@anthropic-ai/sdk/lib/tools/SessionToolRunner', async (importOriginal) => {
  const sdk = await importOriginal<typeof import('@anthropic-ai/sdk/lib/tools/SessionToolRunner')>();
  class RecordingRunner extends sdk.SessionToolRunner {
    constructor(sessionId: string, opts: ConstructorParameters<typeof sdk.SessionToolRunner>[1]) {
      const o = opts as { maxConcurrentCalls?: unknown };
      seen.push({ given: 'maxConcurrentCalls' in o, value: o.maxConcurrentCalls });
      super(sessionId, opts);
    }
  }
  return { ...sdk, SessionToolRunner: RecordingRunner };
});

describe('maxConcurrentCalls', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
    seen.length = 0;
  });
  afterEach(async () => {
    await h.cleanup();
  });

  const rows = [
    { description: 'the default (1) is left to the runner', option: {}, expected: { given: false, value: undefined } },
    { description: 'a count reaches the runner', option: { maxConcurrentCalls: 3 }, expected: { given: true, value: 3 } },
    {
      description: 'null (no limit) reaches the runner as null',
      option: { maxConcurrentCalls: null },
      expected: { given: true, value: null },
    },
  ];
  for (const row of rows) {
    it(row.description, async () => {
      const { sessionId } = await h.emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo one' } }] });
      const worker = h.worker(row.option);
      const running = worker.run();
      const done = await h.emu.waitForSession(sessionId, { timeoutMs: 20_000 });
      await worker.close();
      await running;

      expect(done.toolResults.map((r) => r.text.trim())).toEqual(['one']);
      expect(seen).toEqual([row.expected]);
    });
  }
});
