// Pins the `demo` command's exit code (the demo exits non-zero if any of its outcomes is wrong):
// a failing verdict exits 5, a passing one 0, a crash 1 — through runCli with
// an injected runner, the same path the shipped command and `npm run demo` take. Then the real
// command once end to end, spawned through the CLI entry: exit 0 and the summary table printed.
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/cli.js';
import { createDemoCommand, type DemoRunner } from '../../src/cli/demo-command.js';
import { EXIT } from '../../src/cli/exit-codes.js';
import type { CliIo } from '../../src/cli/io.js';
import type { DemoOptions } from '../../src/demo/run-demo.js';
import { childEnv, spawnCli } from './spawn-cli.js';

function io(): CliIo & { out: string; err: string } {
  const o = {
    out: '',
    err: '',
    env: {},
    cwd: process.cwd(),
    stdout: (t: string) => void (o.out += t),
    stderr: (t: string) => void (o.err += t),
  };
  return o;
}

describe('the demo command', () => {
  const verdicts = [
    { description: 'exits 5 when the verdict fails', ok: false, code: EXIT.CHECK_FAILED },
    { description: 'exits 0 when the verdict passes', ok: true, code: EXIT.OK },
  ];
  it.each(verdicts)('$description', async ({ ok, code }) => {
    const seen: DemoOptions[] = [];
    const runner: DemoRunner = async (options) => {
      seen.push(options);
      options.out(ok ? 'demo passed\n' : 'demo FAILED\n');
      return { ok };
    };
    const o = io();
    expect(await runCli(['demo'], o, [createDemoCommand(runner)])).toBe(code);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.keep).toBe(false);
    expect(o.out).toBe(ok ? 'demo passed\n' : 'demo FAILED\n');
  });

  it('passes --keep to the runner', async () => {
    let keep: boolean | undefined;
    const o = io();
    expect(await runCli(['demo', '--keep'], o, [createDemoCommand(async (options) => ((keep = options.keep), { ok: true }))])).toBe(
      EXIT.OK,
    );
    expect(keep).toBe(true);
  });

  it('exits 1 with the error on stderr when the demo crashes', async () => {
    const o = io();
    const code = await runCli(['demo'], o, [createDemoCommand(async () => Promise.reject(new Error('emulator failed to start')))]);
    expect(code).toBe(EXIT.UNEXPECTED);
    expect(o.err).toContain('emulator failed to start');
  });

  it('runs end to end through the CLI entry: exit 0, the summary table and "demo passed"', async () => {
    const cli = spawnCli(['demo'], childEnv({}));
    const { code } = await cli.exited;
    const out = cli.stdout();
    expect({ code, stderr: cli.stderr() }).toEqual({ code: 0, stderr: '' });
    expect(out).toMatch(/^mount root: \S+/m);
    expect(out).toMatch(
      /^store\s+access\s+downloaded\s+uploaded\s+conflicts \(store won\)\s+deletes\s+refused writes\s+final flush\s+folder removed$/m,
    );
    expect(out).toMatch(/^User Preferences\s+read_write\s+\d+\s+[1-9]\d*\s+[1-9]\d*\s+[1-9]\d*\s+0\s+\d+ ms\s+yes$/m);
    expect(out).toMatch(/^Company Handbook\s+read_only\s+2\s+0\s+0\s+0\s+[1-9]\d*\s+\d+ ms\s+yes$/m);
    expect(out).not.toContain('FAIL');
    expect(out).toMatch(/^demo passed in \d+\.\d s$/m);
  }, 90_000);

  it('runs where no sandbox can start (no bubblewrap on PATH), saying so: exit 0 and "demo passed"', async () => {
    // A PATH with every program of /usr/bin but bubblewrap (the agent's bash still finds rm).
    const bin = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-demo-bin-'));
    for (const name of await fsp.readdir('/usr/bin'))
      if (name !== 'bwrap') await fsp.symlink(path.join('/usr/bin', name), path.join(bin, name));
    const cli = spawnCli(['demo'], childEnv({ PATH: bin }));
    const { code } = await cli.exited;
    const out = cli.stdout();
    expect({ code, stderr: cli.stderr() }).toEqual({ code: 0, stderr: '' });
    expect(out).toMatch(
      /^no sandbox starts here \(missing: bubblewrap \(bwrap\) is not on PATH\); the demo runs its scripted agent's tools in this process/m,
    );
    expect(out).toContain('apt-get install bubblewrap');
    expect(out).toMatch(/^demo passed in \d+\.\d s$/m);
    await fsp.rm(bin, { recursive: true, force: true });
  }, 90_000);
});
