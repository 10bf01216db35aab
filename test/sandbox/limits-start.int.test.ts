// A sandbox's start runs at the worker's CPU weight, in this host's real cgroup hierarchy (cgroup
// v1 as root here; skipped where the worker has no CPU cgroup): right after the session's sandbox
// is started, its cgroup and the sandboxes' parent are raised; once its tool host is ready (the
// first call answered), both are back at the configured weight, with the sandbox's processes in
// the session's CPU cgroup. A sandbox closed before it is ready puts the weights back too.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { probeCgroupSupport } from '../../src/sandbox/limits/cgroup-host.js';
import { sweepSandboxCgroups } from '../../src/sandbox/limits/cgroup-sweep.js';
import { resolveSandboxOption } from '../../src/sandbox/options.js';
import { resolveSandbox } from '../../src/sandbox/resolve.js';
import { SessionSandbox } from '../../src/sandbox/session-sandbox.js';

const log = pino({ level: 'silent' });
const probe = probeCgroupSupport();
const withCpuCgroup = probe.kind !== 'none' && probe.controllers.includes('cpu');
const temps: string[] = [];
const parents: string[] = [];

afterEach(async () => {
  for (const t of temps.splice(0)) {
    await sweepSandboxCgroups(path.join(t, 'state'), { alive: () => false });
    fs.rmSync(t, { recursive: true, force: true });
  }
  for (const p of parents.splice(0)) {
    try {
      fs.rmdirSync(p);
    } catch {
      // Shared by the hierarchies of v2, or gone.
    }
  }
});

/** A cgroup's CPU weight on the v2 scale, from cpu.weight (v2) or cpu.shares (v1). */
function weight(dir: string): number {
  const v2 = path.join(dir, 'cpu.weight');
  if (fs.existsSync(v2)) return Number(fs.readFileSync(v2, 'utf8'));
  return Math.round((Number(fs.readFileSync(path.join(dir, 'cpu.shares'), 'utf8')) * 100) / 1024);
}

async function sandbox(): Promise<{ sb: SessionSandbox; parent: string; sessionKey: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'maw-start-weight-'));
  temps.push(dir);
  const stateDir = path.join(dir, 'state');
  const workdir = path.join(dir, 'work');
  fs.mkdirSync(stateDir);
  fs.mkdirSync(workdir);
  const runtime = await resolveSandbox(resolveSandboxOption('bwrap'), { log, concurrency: 1, stateDir });
  const cg = runtime.kind === 'bwrap' ? runtime.limits?.cgroups : undefined;
  if (runtime.kind !== 'bwrap' || cg === undefined || cg.kind === 'none') throw new Error('no sandbox cgroups on this host');
  parents.push(...Object.values(cg.parents));
  const sessionKey = `sesn_start_${path.basename(dir)}`;
  const sb = new SessionSandbox(
    runtime,
    { workdir, allowedRoots: [], readOnlyRoots: [], maxFileBytes: undefined, hide: [stateDir], sessionId: sessionKey },
    log,
  );
  return { sb, parent: cg.parents.cpu!, sessionKey };
}

describe.runIf(withCpuCgroup)("a sandbox's start and the CPU weight", () => {
  it('runs at the worker weight until its tool host is ready, then at the configured one', async () => {
    const { sb, parent, sessionKey } = await sandbox();
    expect(weight(parent)).toBe(50);
    sb.warmUp();
    const leaf = path.join(parent, `${process.pid}-${sessionKey}`);
    expect(weight(parent)).toBe(100);
    expect(weight(leaf)).toBe(10_000);
    const bash = sb.tools().find((t) => t.name === 'bash')!;
    expect(String(await bash.run({ command: 'echo ran' } as never))).toContain('ran');
    expect(weight(parent)).toBe(50);
    expect(weight(leaf)).toBe(100);
    const inLeaf = fs.readFileSync(path.join(leaf, 'cgroup.procs'), 'utf8').split(/\s+/).filter(Boolean).map(Number);
    expect(inLeaf).toContain(sb.sandboxPid);
    await sb.close();
    expect(fs.existsSync(leaf)).toBe(false);
  }, 60_000);

  it('a sandbox closed before it is ready puts the weights back', async () => {
    const { sb, parent } = await sandbox();
    sb.warmUp();
    expect(weight(parent)).toBe(100);
    await sb.close();
    expect(weight(parent)).toBe(50);
  }, 60_000);
});
