// Pins `managed-agents-worker emulator` as a user tries it in two terminals: it prints the export
// lines, a `run` started with exactly those variables serves the queued demo session (the
// emulator reports its end and the memory the agent wrote), Enter queues another, and SIGINT
// stops it with exit 0 and removes its temp mount root. With --claim it prints the variables for
// `handle`, which then serves the item.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { childEnv, spawnCli, type CliRun } from './spawn-cli.js';

/** The variables of the `export NAME=value` lines the emulator printed. */
function exportedVariables(stdout: string): Record<string, string> {
  return Object.fromEntries([...stdout.matchAll(/^export (ANTHROPIC_\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

const ENDED =
  /demo session (\S+) ended: terminated, work stopped, 3 tool results; its store now holds \/from-the-agent\.md, \/readme\.md$/m;

function endedSessions(stdout: string): number {
  return stdout.split('\n').filter((line) => ENDED.test(line)).length;
}

describe('managed-agents-worker emulator', () => {
  let workdir: string;
  const children: CliRun[] = [];
  beforeEach(async () => {
    workdir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-emulator-test-'));
  });
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.child.exitCode === null) c.child.kill('SIGKILL');
    await fs.rm(workdir, { recursive: true, force: true });
  });

  it('prints the exports; run with them serves the demo sessions, Enter queues another, SIGINT exits 0', async () => {
    const emulator = spawnCli(['emulator', '--port', '0', '--latency-ms', '1'], childEnv({}), { stdin: 'pipe' });
    children.push(emulator);
    await emulator.waitForStdout('queued demo session');
    const vars = exportedVariables(emulator.stdout());
    expect(Object.keys(vars).sort()).toEqual(['ANTHROPIC_BASE_URL', 'ANTHROPIC_ENVIRONMENT_ID', 'ANTHROPIC_ENVIRONMENT_KEY']);
    const mountRoot = /demo stores mount under (\S+)$/m.exec(emulator.stdout())![1]!;

    const run = spawnCli(['run', '--workdir', workdir, '--max-idle', '1000', '--log-level', 'warn'], childEnv(vars));
    children.push(run);
    await emulator.waitForStdout(ENDED, 30_000);
    emulator.child.stdin!.write('\n');
    await emulator.waitForStdout(/queued demo session .*demo-notes-2$/m);
    await emulator.waitForStdout(/ended:[^\n]*\n[\s\S]*ended:/, 30_000);
    expect(endedSessions(emulator.stdout()), emulator.stdout()).toBe(2);

    run.child.kill('SIGTERM');
    expect((await run.exited).code).toBe(0);
    emulator.child.kill('SIGINT');
    expect((await emulator.exited).code).toBe(0);
    expect(emulator.stdout()).toMatch(/^emulator stopped$/m);
    await expect(fs.stat(mountRoot)).rejects.toMatchObject({ code: 'ENOENT' });
  }, 90_000);

  it('with --claim, prints the variables for handle, which serves the item and exits 0', async () => {
    const emulator = spawnCli(['emulator', '--claim'], childEnv({}));
    children.push(emulator);
    await emulator.waitForStdout(/managed-agents-worker handle/);
    const line = /^(ANTHROPIC_WORK_ID=\S+ ANTHROPIC_SESSION_ID=\S+ ANTHROPIC_WORK_SECRET=\S+) managed-agents-worker handle/m.exec(
      emulator.stdout(),
    )![1]!;
    const itemVars = Object.fromEntries(line.split(' ').map((kv) => kv.split('=') as [string, string]));
    const handle = spawnCli(
      ['handle', '--workdir', workdir, '--max-idle', '1000', '--log-level', 'warn'],
      childEnv({ ...exportedVariables(emulator.stdout()), ...itemVars }),
    );
    children.push(handle);
    expect((await handle.exited).code).toBe(0);
    expect(JSON.parse(handle.stdout())).toMatchObject({ status: 'completed', workId: itemVars['ANTHROPIC_WORK_ID'] });
    await emulator.waitForStdout(ENDED);
    emulator.child.kill('SIGTERM');
    expect((await emulator.exited).code).toBe(0);
  }, 90_000);
});
