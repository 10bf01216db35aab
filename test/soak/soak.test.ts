/**
 * The short fault soak: a few seeded sessions served by our EnvironmentWorker on the emulator under
 * 5xx/429, lost responses, stream cuts, lease losses and hangs, with agents editing and Console edits
 * landing. Every invariant holds: no edit lost, no memory duplicated, no tool call run twice, no
 * acknowledged item left un-stopped, no unhandled rejection, nothing left behind. `npm run soak`
 * runs the long version.
 */
import { describe, expect, it } from 'vitest';
import { runSoak } from '../../bench/soak/run-soak.js';
import { formatSoakTable } from '../../bench/soak/table.js';

describe('the short fault soak', () => {
  // About 25 s on an idle machine; the deadline leaves room for a loaded one (a session still
  // running at the deadline is reported as never ended).
  it('keeps every invariant under injected faults', { timeout: 180_000 }, async () => {
    const result = await runSoak({ sessions: 12, seed: 3, concurrency: 6, maxSleepMs: 4_000, deadlineMs: 120_000, sandbox: 'bwrap' });
    console.log(`${formatSoakTable(result.stats, result.verdict)}\n${result.keptAt ? `kept: ${result.keptAt}` : ''}`);

    // The faults really fired, and the agents really edited.
    expect(result.stats.memoryFailed).toBeGreaterThan(0);
    expect(result.stats.workFailed).toBeGreaterThan(0);
    expect(result.stats.lostResponses).toBeGreaterThan(0);
    expect(result.stats.streamDrops + result.stats.leaseLossesInjected + result.stats.hangs).toBeGreaterThan(0);
    expect(result.verdict.counts.editsChecked).toBeGreaterThan(20);
    expect(result.verdict.violations).toEqual([]);
  });
});
