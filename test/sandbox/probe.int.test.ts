// The start check and every doctor sandbox row start a session's sandbox: the same launcher,
// descriptors, wrapper, tool host and egress hand-over. A bubblewrap that records its arguments
// sees a session's command line from the probe; one that breaks only the session's launch (it
// refuses bubblewrap's --info-fd, which only the session's launcher passes) makes the rows fail.
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSandbox, checkSeccomp, checkUserNamespace } from '../../src/cli/doctor/checks.js';
import { probeSandbox, type SandboxProbe } from '../../src/sandbox/probe.js';

let tmp: string;
let bwrap: string;
beforeAll(async () => {
  tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-probe-'));
  const real = ['/usr/bin/bwrap', '/bin/bwrap'].find((p) => fs.existsSync(p));
  if (real === undefined) throw new Error('bubblewrap must be installed here');
  bwrap = real;
});
afterAll(async () => {
  await fsp.rm(tmp, { recursive: true, force: true });
});

/** A bubblewrap that writes its arguments (one per line) to `log`, then runs the real one, or fails on `--info-fd`. */
async function standIn(name: string, breakSessions: boolean): Promise<{ path: string; log: string }> {
  const p = path.join(tmp, name);
  const log = path.join(tmp, `${name}.args`);
  const refuse = breakSessions
    ? 'for a in "$@"; do if [ "$a" = --info-fd ]; then echo "bwrap: this launch is broken" >&2; exit 1; fi; done\n'
    : '';
  await fsp.writeFile(p, `#!/bin/sh\nprintf '%s\\n' "$@" >> '${log}'\n${refuse}exec '${bwrap}' "$@"\n`, { mode: 0o755 });
  return { path: p, log };
}

const rows = (probe: SandboxProbe) => {
  const kernel = probe.ok ? { ran: true as const, ...probe.report } : { ran: false as const, problem: probe.problem };
  return [checkSandbox(probe.ok ? { ok: true, bwrap: probe.bwrap } : probe), checkUserNamespace(kernel), checkSeccomp(kernel)];
};

describe("the sandbox probe is a session's sandbox", () => {
  it('passes, with the command line of a session: info and seccomp descriptors, the tool host, its own network and the listener channel', async () => {
    const rec = await standIn('recording-bwrap', false);
    const probe = await probeSandbox({ bwrapPath: rec.path });
    expect(probe.ok).toBe(true);
    expect(rows(probe).map((r) => r.status)).toEqual(['pass', 'pass', 'pass']);
    // The first call asks bubblewrap for its options (--help); the session's launch follows.
    const all = (await fsp.readFile(rec.log, 'utf8')).split('\n');
    const args = all.slice(all.indexOf('--info-fd'));
    expect(args.slice(0, 4)).toEqual(['--info-fd', '3', '--seccomp', '4']);
    for (const a of ['--unshare-user', '--disable-userns', '--unshare-net', '--cap-drop', 'NODE_CHANNEL_FD', '--size'])
      expect(args).toContain(a);
    expect(args.some((a) => a.endsWith('tool-host.cjs'))).toBe(true);
  }, 30_000);

  it("fails every sandbox row when a session's launch breaks", async () => {
    const broken = await standIn('broken-bwrap', true);
    const probe = await probeSandbox({ bwrapPath: broken.path });
    expect(probe).toMatchObject({ ok: false, reason: 'probe_failed' });
    if (probe.ok) return;
    expect(probe.problem).toContain('this launch is broken');
    expect(rows(probe).map((r) => r.status)).toEqual(['fail', 'skip', 'skip']);
  }, 30_000);
});
