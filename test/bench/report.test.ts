/**
 * Pins how the benchmark table is computed from the repetitions: each side is the median of its
 * samples, the ratio is the median of the per-repetition ratios (ours / official, or ours' mount
 * wall / floor, or ours' queue wall and CPU / the floor's) with its spread, and a row meets its
 * target when that median ratio is at most the target. A scenario that did not run shows n/a,
 * never a number.
 */
import { describe, expect, it } from 'vitest';
import { buildRows, formatTable, median, ROWS } from '../../bench/report.js';

describe('median', () => {
  it.each([
    { description: 'odd count', xs: [3, 1, 2], want: 2 },
    { description: 'even count', xs: [4, 1, 3, 2], want: 2.5 },
    { description: 'one sample', xs: [7], want: 7 },
    { description: 'no sample', xs: [], want: NaN },
  ])('$description', ({ xs, want }) => {
    expect(median(xs)).toEqual(want);
  });
});

describe('buildRows', () => {
  const mountRow = (rows: ReturnType<typeof buildRows>) => rows.find((r) => r.label.endsWith('8 stores × 250 × 1 KiB, 50 ms per answer'))!;
  const retiredRow = (rows: ReturnType<typeof buildRows>) =>
    rows.find((r) => r.label === 'claim → first tool call, 8 stores × 250 × 1 KiB')!;
  const floorRow = (rows: ReturnType<typeof buildRows>) => rows.find((r) => r.label.startsWith('mount wall 8 × 250'))!;

  it('takes medians per side and the median per-repetition ratio with its spread', () => {
    const reps = [
      {
        official: { claimToFirstToolMs: 1000, mountWallMs: 0 },
        ours: { claimToFirstToolMs: 50, mountWallMs: 300 },
        floor: { floorMs: 200 },
      },
      {
        official: { claimToFirstToolMs: 2000, mountWallMs: 0 },
        ours: { claimToFirstToolMs: 120, mountWallMs: 200 },
        floor: { floorMs: 200 },
      },
      {
        official: { claimToFirstToolMs: 1500, mountWallMs: 0 },
        ours: { claimToFirstToolMs: 105, mountWallMs: 400 },
        floor: { floorMs: 200 },
      },
    ];
    const rows = buildRows({ 'mount-8x250': reps, 'mount-8x250-50ms': reps });
    expect(mountRow(rows)).toMatchObject({ base: 1500, ours: 105, ratio: 0.06, ratioMin: 0.05, ratioMax: 0.07, target: 0.08, met: true });
    expect(floorRow(rows)).toMatchObject({ against: 'floor', base: 200, ours: 300, ratio: 1.5, target: null, met: null });
    // A retired target: the row still prints its figures, and is judged neither way.
    expect(retiredRow(rows)).toMatchObject({ base: 1500, ours: 105, ratio: 0.06, target: null, met: null });
  });

  it("compares the queue of sessions with the floor on the same figure: wall and CPU of ours over the bare client's", () => {
    const rows = buildRows({
      'queue-16x10': [
        { official: { wallMs: 4000, cpuMs: 2000 }, ours: { wallMs: 1000, cpuMs: 1500 }, floor: { wallMs: 500, cpuMs: 750 } },
        { official: { wallMs: 4200, cpuMs: 2100 }, ours: { wallMs: 1200, cpuMs: 1200 }, floor: { wallMs: 400, cpuMs: 800 } },
      ],
    });
    expect(rows.find((r) => r.label.startsWith('16 queued sessions vs floor'))).toMatchObject({
      against: 'floor',
      base: 450,
      ours: 1100,
      ratio: 2.5,
      target: 1.5,
      met: false,
    });
    expect(rows.find((r) => r.label.startsWith('16 queued sessions: worker CPU vs floor'))).toMatchObject({
      against: 'floor',
      base: 775,
      ours: 1350,
      ratio: 1.75,
      met: null,
    });
    expect(rows.find((r) => r.label.startsWith('16 queued sessions × 10'))).toMatchObject({ against: 'official', base: 4100, ours: 1100 });
  });

  it('holds a `max` row to ours alone and a `plus` row to ours minus the official', () => {
    const rows = buildRows({
      'sessions-plateau': [
        { official: { rssGrowthMiB: 40 }, ours: { rssGrowthMiB: 12 } },
        { official: { rssGrowthMiB: 50 }, ours: { rssGrowthMiB: 25 } },
        { official: { rssGrowthMiB: 45 }, ours: { rssGrowthMiB: 15 } },
      ],
      'mount-8x250': [{ official: { readyRssMiB: 67 }, ours: { readyRssMiB: 80 } }],
    });
    expect(rows.find((r) => r.label.startsWith('RSS growth from session 50'))).toMatchObject({
      kind: 'max',
      judged: 15,
      target: 19,
      met: true,
    });
    expect(rows.find((r) => r.label.startsWith('RSS at ready'))).toMatchObject({ kind: 'plus', judged: 13, target: 8, met: false });
    expect(formatTable(rows)).toContain('≤ official + 8.0 MiB');
  });

  it('fails a row whose median ratio is above its target', () => {
    const rows = buildRows({ 'mount-8x250-50ms': [{ official: { claimToFirstToolMs: 1000 }, ours: { claimToFirstToolMs: 260 } }] });
    expect(mountRow(rows).met).toBe(false);
  });

  it('gives every row, with n/a for the scenarios that did not run', () => {
    const rows = buildRows({});
    expect(rows.map((r) => r.label)).toEqual(ROWS.map((r) => r.label));
    expect(
      formatTable(rows)
        .split('\n')
        .slice(2)
        .every((line) => line.includes('n/a') && !line.includes('NaN')),
    ).toBe(true);
    expect(rows.every((r) => r.met === null)).toBe(true);
  });
});
