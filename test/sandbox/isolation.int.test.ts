// Two tenants' sessions on one shared worker: with the default `sandbox` option, tenant A's agent
// (bash only) reaches nothing of tenant B, of the worker or of its own read-only store, while a
// Console edit still reaches that store's folder; with `sandbox: 'none'` every one of those
// breaches happens, so the assertions of the first test can fail. Needs bubblewrap: `.ci/run`
// installs it, and this test fails (it does not skip) when the sandbox cannot start.
import { describe, expect, it } from 'vitest';
import { probeSandbox } from '../../src/sandbox/probe.js';
import { runTenants } from './tenants.js';

describe('two tenants on one worker with concurrency 2', () => {
  it('bubblewrap works on this machine (the sandbox tests run for real)', async () => {
    const probe = await probeSandbox();
    expect(probe).toMatchObject({ ok: true });
  });

  it("with the default sandbox, A's bash cannot see B, the worker, its credentials or change its read-only store", async () => {
    const run = await runTenants(undefined);
    expect(run.daemonLog).toContain('each session runs its tools in a bubblewrap sandbox');
    const { seen } = run;
    // Only A's own folders are in the mount parent it sees.
    expect(seen.list.split('\n').filter((l) => !l.startsWith('exit='))).toEqual(['shared-policy', 'tenant-a']);
    expect(seen.readB).toMatch(/No such file or directory[\s\S]*exit=1/);
    expect(seen.writeB).not.toContain('WROTE');
    expect(seen.writeB).toMatch(/No such file or directory/);
    expect(seen.env).not.toContain('ANTHROPIC_');
    expect(seen.env).not.toContain(run.environmentKey);
    expect(seen.procs).not.toContain('tenant-daemon');
    expect(seen.state).toMatch(/No such file or directory[\s\S]*exit=2/);
    expect(seen.key).toMatch(/No such file or directory[\s\S]*exit=1/);
    expect(seen.key).not.toContain(run.environmentKey);
    expect(seen.writeReadOnly).toMatch(/Read-only file system[\s\S]*exit=1/);
    // The worker still writes the Console's edit into the read-only folder from outside.
    expect(seen.readReadOnly).toMatch(/^v2 from the Console\n?exit=0$/);
    expect(run.storeReadOnly).toEqual({ '/policy.md': 'v2 from the Console' });
    // A descriptor the daemon inherited is closed before the sandbox starts.
    expect(run.leakedPipe).toBe('');
    // B's store ends exactly as B's agent left it.
    expect(run.storeB).toEqual({ '/b.md': 'B final' });
    expect(run.daemonExit).toBe(0);
  }, 120_000);

  it("with sandbox: 'none', each of those breaches happens", async () => {
    const run = await runTenants('none');
    const { seen } = run;
    expect(seen.list).toContain('tenant-b');
    expect(seen.readB).toMatch(/B (original|final)/);
    expect(seen.writeB).toContain('WROTE');
    expect(seen.env).toContain(`ANTHROPIC_ENVIRONMENT_KEY=${run.environmentKey}`);
    expect(seen.procs).toContain('tenant-daemon');
    expect(seen.state).toContain('exit=0');
    expect(seen.key).toContain(run.environmentKey);
    expect(seen.writeReadOnly).toBe('exit=0');
    expect(run.leakedPipe).toContain('leaked');
    // A's text was uploaded into B's store at B's last sync.
    expect(run.storeB).toEqual({ '/b.md': 'A was here\n' });
    expect(run.daemonExit).toBe(0);
  }, 120_000);
});
