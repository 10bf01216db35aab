// Which limits a call reached, from the session cgroup's counters: counted from the last check,
// and, after rebase() (the sandbox that hit a limit was just ended), not counting what the ended
// sandbox did while it died.
import { describe, expect, it } from 'vitest';
import { LimitWatch } from '../../src/sandbox/limits/limit-watch.js';
import { SANDBOX_LIMITS_DEFAULT } from '../../src/sandbox/limits/limits.js';
import type { SessionCgroup } from '../../src/sandbox/limits/session-cgroup.js';

function fakeCgroup() {
  const counters = { oomKills: 0, pidsRefused: 0 };
  return { counters, cgroup: { counters: () => ({ ...counters }) } as unknown as SessionCgroup };
}

describe('LimitWatch', () => {
  it('tells each limit reached since the last check, once', () => {
    const { counters, cgroup } = fakeCgroup();
    const watch = new LimitWatch(SANDBOX_LIMITS_DEFAULT, cgroup);
    counters.pidsRefused = 7;
    counters.oomKills = 1;
    expect(watch.check(undefined).map((h) => [h.limit, h.count])).toEqual([
      ['memory', 1],
      ['processes', 7],
    ]);
    expect(watch.check(undefined)).toEqual([]);
  });

  it("after rebase(), what the ended sandbox did while it died is not the next call's", () => {
    const { counters, cgroup } = fakeCgroup();
    const watch = new LimitWatch(SANDBOX_LIMITS_DEFAULT, cgroup);
    counters.pidsRefused = 50;
    expect(watch.check(undefined).map((h) => h.count)).toEqual([50]);
    // The fork bomb's last forks are refused while its sandbox is killed.
    counters.pidsRefused = 53;
    watch.rebase();
    expect(watch.check(undefined)).toEqual([]);
    counters.pidsRefused = 54;
    expect(watch.check(undefined).map((h) => h.count)).toEqual([1]);
  });
});
