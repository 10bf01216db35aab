/**
 * Pins that `npm run bench` works end to end: its quick smoke mode runs every scenario with the
 * official worker, ours and the floor child, and prints (as JSON) a table holding every row with a
 * number on each side and a ratio. Whether a row meets its target is not asserted here: quick-mode
 * figures come from tiny stores and jobs run side by side.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROWS, type Row } from '../../bench/report.js';

const run = promisify(execFile);
const repo = path.resolve(import.meta.dirname, '..', '..');

describe('npm run bench -- --quick', () => {
  it('prints every row of the table with numbers for the official worker (or floor), ours and their ratio', async () => {
    const { stdout } = await run(
      process.execPath,
      [path.join(repo, 'node_modules', 'tsx', 'dist', 'cli.mjs'), 'bench/main.ts', '--quick', '--json'],
      {
        cwd: repo,
        maxBuffer: 16 * 1024 * 1024,
        timeout: 170_000,
      },
    );
    const report = JSON.parse(stdout) as { rows: Row[]; quick: boolean; reps: number };
    expect(report.quick).toBe(true);
    expect(report.rows.map((r) => r.label)).toEqual(ROWS.map((r) => r.label));
    for (const row of report.rows) {
      // A growth figure (RSS from one point to a later one) may be 0 or below: it is judged on its own.
      if (row.kind === 'max' && row.label.includes('growth')) {
        expect({ label: row.label, ours: Number.isFinite(row.ours), judged: Number.isFinite(row.judged) }).toEqual({
          label: row.label,
          ours: true,
          judged: true,
        });
        continue;
      }
      // A row whose target is 0 (requests the warm session must not make) has 0 on our side.
      const oursOk = Number.isFinite(row.ours) && (row.ours > 0 || (row.target === 0 && row.ours === 0));
      expect({ label: row.label, base: Number.isFinite(row.base) && row.base > 0, ours: oursOk }).toEqual({
        label: row.label,
        base: true,
        ours: true,
      });
      expect(Number.isFinite(row.ratio)).toBe(true);
    }
  }, 180_000);
});
