/**
 * Pins that the memory options are validated in one place: the worker options, the SyncLoop and
 * the CLI flags refuse the same values with the same bounds. `finalFlushMs: 0` (which would cut
 * off every final sync) is refused up front everywhere, before any session runs.
 */
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../../src/cli/cli.js';
import { commands } from '../../../src/cli/commands.js';
import { EXIT } from '../../../src/cli/exit-codes.js';
import { ConfigError } from '../../../src/errors.js';
import { FINAL_FLUSH_MAX_MS, FINAL_FLUSH_MIN_MS, checkMemoryOptions } from '../../../src/memory/sync/options.js';
import { resolveWorkerOptions } from '../../../src/worker/options.js';

const client = new Anthropic({ apiKey: 'sk-test', baseURL: 'http://127.0.0.1:1' });

function linesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return [...(e as ConfigError).issues];
  }
  throw new Error('expected a ConfigError');
}

const rows = [
  { description: 'finalFlushMs 0', input: { finalFlushMs: 0 }, line: /^finalFlushMs: expected .*from 1 to 600000.*got 0$/ },
  { description: 'finalFlushMs over 10 minutes', input: { finalFlushMs: 600_001 }, line: /^finalFlushMs: expected/ },
  {
    description: 'a sync interval of 4999 ms',
    input: { memorySyncIntervalMs: 4_999 },
    line: /^memorySyncIntervalMs: expected a number >= 5000 or null, got 4999$/,
  },
  { description: 'a fractional delete wait', input: { memoryDeleteAfterMs: 1.5 }, line: /^memoryDeleteAfterMs: expected/ },
];

describe('memory option validation', () => {
  it.each(rows)('the worker options and the memory core refuse $description with the same line', ({ input, line }) => {
    const fromWorker = linesOf(() => resolveWorkerOptions({ client, ...input }));
    const fromCore = linesOf(() => checkMemoryOptions(input));
    expect(fromWorker.find((l) => line.test(l))).toBeDefined();
    expect(fromCore.find((l) => line.test(l))).toEqual(fromWorker.find((l) => line.test(l)));
  });

  it('refuses --final-flush 0 from the CLI before any session runs (usage error, same bounds)', async () => {
    const o = {
      out: '',
      err: '',
      env: {},
      cwd: process.cwd(),
      stdout: (t: string) => void (o.out += t),
      stderr: (t: string) => void (o.err += t),
    };
    expect(await runCli(['run', '--final-flush', '0'], o, commands())).toBe(EXIT.USAGE);
    expect(o.err).toMatch(new RegExp(`${FINAL_FLUSH_MIN_MS}.*${FINAL_FLUSH_MAX_MS}`));
  });

  it('accepts the defaults and the bounds', () => {
    expect(() => checkMemoryOptions({ finalFlushMs: 1, memoryDeleteAfterMs: 0, memorySyncIntervalMs: null })).not.toThrow();
    expect(resolveWorkerOptions({ client, finalFlushMs: 1 }).finalFlushMs).toBe(1);
  });
});
