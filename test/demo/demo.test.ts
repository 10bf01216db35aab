// Pins `npm run demo`: the whole scripted session on the embedded emulator passes every check, in
// under a minute, prints the mount root, a live log and the summary table, and removes its temp
// folder. The summary rows are computed from the worker's events and the stores' final contents.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runDemo } from '../../src/demo/run-demo.js';
import { formatSummaryTable, summaryRow } from '../../src/demo/summary.js';
import { emptyStoreTally } from '../../src/demo/tally.js';

describe('the demo', () => {
  it('passes every check in under a minute and prints the live log and the summary', async () => {
    let out = '';
    const result = await runDemo({ out: (t) => void (out += t), logLevel: 'silent', sandbox: 'bwrap' });
    expect(result.expectations.filter((e) => !e.ok)).toEqual([]);
    expect(result.ok).toBe(true);
    expect(result.durationMs).toBeLessThan(60_000);
    expect(out).toContain(`mount root: ${result.mountRoot}`);
    for (const kind of ['claim', 'mount', 'sync', 'conflict', 'upload', 'delete', 'final', 'flush', 'unmount']) {
      expect(out).toMatch(new RegExp(`^\\s+\\d+\\.\\ds  ${kind}\\s`, 'm'));
    }
    expect(out).toMatch(/^User Preferences\s+read_write\s+\d+\s+[1-9]\d*\s+[1-9]\d*\s+[1-9]\d*\s+0\s+\d+ ms\s+yes$/m);
    expect(out).toMatch(/^Company Handbook\s+read_only\s+2\s+0\s+0\s+0\s+[1-9]\d*\s+\d+ ms\s+yes$/m);
    expect(out).toContain('demo passed');
    expect(existsSync(result.mountRoot)).toBe(false);
  });
});

describe('summaryRow', () => {
  const rows = [
    {
      description: 'a folder still on disk is not reported removed even when the unmount event said so',
      tally: { ...emptyStoreTally(), unmounted: true },
      extra: { refusedToolCalls: 0, folderExists: true, session: { finalMs: undefined, flushMs: undefined } },
      expected: { folderRemoved: false },
    },
    {
      description: 'refused writes take the larger of refusal events and refused tool calls',
      tally: { ...emptyStoreTally(), refusedEvents: 1 },
      extra: { refusedToolCalls: 2, folderExists: false, session: { finalMs: undefined, flushMs: undefined } },
      expected: { refusedWrites: 2 },
    },
    {
      description: 'the final flush time adds the store final sync and the session-wide flush',
      tally: { ...emptyStoreTally(), finalMs: 6 },
      extra: { refusedToolCalls: 0, folderExists: false, session: { finalMs: 100, flushMs: 2 } },
      expected: { finalFlushMs: 8 },
    },
    {
      description: 'no final or flush report leaves the time unknown',
      tally: emptyStoreTally(),
      extra: { refusedToolCalls: 0, folderExists: false, session: { finalMs: undefined, flushMs: undefined } },
      expected: { finalFlushMs: undefined },
    },
  ];
  it.each(rows)('$description', ({ tally, extra, expected }) => {
    expect(summaryRow('S', 'read_write', tally, extra)).toMatchObject(expected);
  });

  it('formats one aligned line per store under a header', () => {
    const table = formatSummaryTable([
      summaryRow(
        'A store',
        'read_only',
        { ...emptyStoreTally(), downloaded: 12, unmounted: true },
        { refusedToolCalls: 0, folderExists: false, session: { finalMs: 3, flushMs: 1 } },
      ),
    ]);
    const lines = table.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^store\s+access\s+downloaded/);
    expect(lines[2]).toMatch(/^A store\s+read_only\s+12\s+0\s+0\s+0\s+0\s+4 ms\s+yes$/);
  });
});
