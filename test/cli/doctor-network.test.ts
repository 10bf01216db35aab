// doctor's rows for the sandbox network: the namespace and the egress proxy pass or fail with the
// fix as the probe says, and are skipped when no sandbox starts; on this host (bubblewrap
// installed) the real probe finds the host's loopback out of reach and the proxy refusing it.
import { describe, expect, it } from 'vitest';
import { checkNetwork } from '../../src/cli/doctor/checks.js';
import { probeSandbox } from '../../src/sandbox/probe.js';

describe('checkNetwork', () => {
  const rows = [
    {
      description: 'both pass',
      probe: { namespace: { ok: true, detail: 'own' }, proxy: { ok: true, detail: 'refuses' } },
      statuses: ['pass', 'pass'],
    },
    {
      description: 'a shared namespace fails with a fix',
      probe: { namespace: { ok: false, detail: 'reachable' }, proxy: { ok: true, detail: 'refuses' } },
      statuses: ['fail', 'pass'],
    },
    {
      description: 'a proxy that does not answer fails with a fix',
      probe: { namespace: { ok: true, detail: 'own' }, proxy: { ok: false, detail: 'no answer' } },
      statuses: ['pass', 'fail'],
    },
    { description: 'no sandbox: both skipped', probe: undefined, statuses: ['skip', 'skip'] },
  ] as const;
  for (const row of rows) {
    it(row.description, () => {
      const results = checkNetwork(row.probe);
      expect(results.map((r) => r.id)).toEqual(['sandbox_netns', 'sandbox_proxy']);
      expect(results.map((r) => r.status)).toEqual(row.statuses);
      for (const r of results) expect(r.fix === '').toBe(r.status !== 'fail');
    });
  }
});

describe('the real network probe', () => {
  it("from inside a session's sandbox, finds the host's loopback out of reach and the session's proxy refusing it", async () => {
    const sandbox = await probeSandbox();
    if (!sandbox.ok) throw new Error(`bubblewrap must work here: ${sandbox.problem}`);
    const probe = sandbox.report.network;
    expect(probe?.namespace).toMatchObject({ ok: true });
    expect(probe?.namespace.detail).toContain('out of reach');
    expect(probe?.proxy).toMatchObject({ ok: true });
    expect(probe?.proxy.detail).toContain('403');
  }, 30_000);

  it("with the host's network chosen, reports no network rows", async () => {
    const sandbox = await probeSandbox({ network: 'host' });
    if (!sandbox.ok) throw new Error(`bubblewrap must work here: ${sandbox.problem}`);
    expect(sandbox.report.network).toBeUndefined();
    expect(sandbox.report.seccompMode).toBe(2);
  }, 30_000);
});
