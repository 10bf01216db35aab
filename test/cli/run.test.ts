// Pins `managed-agents-worker run` as a poll daemon in a child process: with `--concurrency 2` it
// serves two sessions at once, its metrics endpoint is scraped once mid-session (claimed 2,
// active 2, ready), a SIGTERM mid-session drains (both items stopped) and exits 0, every line on
// stderr is JSON (the metrics address included), a refused option is plain text (exit 3), a refused
// key exits 4 with one short fatal line,
// and a second signal during a long drain exits at once with 143.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { childEnv, spawnCli, type CliRun } from './spawn-cli.js';

async function until(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('managed-agents-worker run', () => {
  let dir: string;
  let emu: Emulator;
  let cli: CliRun | undefined;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-run-'));
    emu = await startEmulator({ mountRoot: dir, leaseTtlSeconds: 4 });
  });
  afterEach(async () => {
    if (cli && cli.child.exitCode === null) cli.child.kill('SIGKILL');
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const env = (): NodeJS.ProcessEnv =>
    childEnv({
      ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
      ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
      ANTHROPIC_BASE_URL: emu.baseURL,
    });

  it('refuses to start without a working sandbox (bubblewrap not on PATH): exit 3, the cause and the fix, nothing claimed', async () => {
    const { workId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'touch /tmp/x' } }] });
    // Node is started by its absolute path; PATH holds no bubblewrap.
    cli = spawnCli(['run', '--workdir', dir], { ...env(), PATH: path.join(dir, 'empty-bin') });
    const { code } = await cli.exited;
    expect(code).toBe(3);
    const fatal = cli
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string; err_code?: string })
      .filter((l) => l.level === 60);
    expect(fatal).toHaveLength(1);
    expect(fatal[0]!.err_code).toBe('MAW_SANDBOX');
    expect(fatal[0]!.msg).toContain('bubblewrap (bwrap) is not on PATH');
    expect(fatal[0]!.msg).toContain('apt-get install bubblewrap');
    expect(fatal[0]!.msg).toContain('--sandbox none');
    expect(emu.workItem(workId)).toMatchObject({ state: 'queued', deliveries: 0 });
  });

  it('serves a session, exposes metrics, and drains on SIGTERM mid-session with exit 0', async () => {
    cli = spawnCli(
      ['run', '--concurrency', '2', '--workdir', dir, '--metrics-port', '0', '--metrics-host', '127.0.0.1', '--max-idle', '2000'],
      env(),
    );
    const metricsLine = /"url":"(http:\/\/[^"]+)\/metrics"/;
    await cli.waitForStderr(metricsLine);
    const metricsUrl = metricsLine.exec(cli.stderr())![1]!;
    const script = [
      { tool: 'bash', input: { command: 'echo first' } },
      { sleepMs: 60_000 },
      { tool: 'bash', input: { command: 'echo never' } },
    ];
    const { sessionId, workId } = await emu.createSession({ script });
    // A second session runs beside the first only because --concurrency 2 reached the worker.
    const other = await emu.createSession({ script });
    await until('the first tool result of both sessions', () =>
      [sessionId, other.sessionId].every((s) => emu.session(s).toolResults.length === 1),
    );

    const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/^maw_items_claimed_total 2$/m);
    expect(metrics).toMatch(/^maw_sessions_active 2$/m);
    expect((await fetch(`${metricsUrl}/readyz`)).status).toBe(200);
    expect((await fetch(`${metricsUrl}/healthz`)).status).toBe(200);

    cli.child.kill('SIGTERM');
    const { code } = await cli.exited;
    expect(code).toBe(0);
    expect(emu.workItem(workId).stopped).toBe(true);
    expect(emu.workItem(other.workId).stopped).toBe(true);
    expect(emu.session(sessionId).toolResults.map((r) => r.text.trim())).toEqual(['first']);
    expect(cli.stderr()).toContain('shutting down');
    const lines = cli
      .stderr()
      .split('\n')
      .filter((l) => l !== '');
    for (const line of lines) expect(() => JSON.parse(line) as unknown, line).not.toThrow();
    expect(cli.stderr()).not.toContain(emu.environmentKey);
    expect(cli.stderr()).not.toContain(emu.sessionsToken(workId)!);
  });

  it('exits at once with 143 on a second SIGTERM during a long drain', async () => {
    // The item's stop request hangs, so the drain after the first signal cannot finish by itself.
    emu.faults.add({ route: /\/work\/[^/]+\/stop$/, hang: true });
    cli = spawnCli(['run', '--workdir', dir, '--log-level', 'info'], env());
    const { sessionId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo first' } }, { sleepMs: 60_000 }] });
    await until('the first tool result', () => emu.session(sessionId).toolResults.length === 1);
    cli.child.kill('SIGTERM');
    await cli.waitForStderr('shutting down');
    // Still draining a second later: the stop request hangs.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(cli.child.exitCode).toBe(null);
    const t0 = Date.now();
    cli.child.kill('SIGTERM');
    const { code } = await cli.exited;
    expect(code).toBe(143);
    expect(Date.now() - t0).toBeLessThan(3_000);
  });

  it('exits 4 on a refused key with one short fatal line (no stack at info)', async () => {
    cli = spawnCli(
      ['run', '--workdir', dir, '--log-level', 'info'],
      childEnv({ ANTHROPIC_ENVIRONMENT_ID: emu.environmentId, ANTHROPIC_ENVIRONMENT_KEY: 'sk-wrong-key', ANTHROPIC_BASE_URL: emu.baseURL }),
    );
    expect((await cli.exited).code).toBe(4);
    const fatal = cli
      .stderr()
      .split('\n')
      .filter((l) => l.includes('"level":60'));
    expect(fatal).toHaveLength(1);
    const line = JSON.parse(fatal[0]!) as { error: { type: string; message: string; status: number; stack?: string } };
    expect(line.error.status).toBe(401);
    expect(line.error.stack ?? '').toBe('');
    expect(fatal[0]!.length).toBeLessThan(1_000);
    expect(cli.stderr()).not.toContain('sk-wrong-key');
  });

  it('prints an option the worker refuses as plain text, as a usage error, and exits 3', async () => {
    cli = spawnCli(['run', '--workdir', '', '--log-level', 'info'], env());
    expect((await cli.exited).code).toBe(3);
    const lines = cli
      .stderr()
      .split('\n')
      .filter((l) => l !== '');
    expect(lines[0]).toMatch(/^managed-agents-worker: invalid EnvironmentWorker options:/);
    expect(lines.filter((l) => /^ {2}workdir: /.test(l))).toHaveLength(1);
    expect(lines.filter((l) => l.startsWith('{'))).toEqual([]);
    expect(cli.stderr()).not.toContain(emu.environmentKey);
  });

  it('prints human-readable logs with --pretty (pino-pretty is installed here)', async () => {
    // Nothing listens on port 9: polls fail and are logged.
    cli = spawnCli(
      ['run', '--pretty', '--workdir', dir, '--base-url', 'http://127.0.0.1:9'],
      childEnv({ ANTHROPIC_ENVIRONMENT_ID: 'env_1', ANTHROPIC_ENVIRONMENT_KEY: 'key-never-logged' }),
    );
    await cli.waitForStderr('poll failed');
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
    const firstLine = cli
      .stderr()
      .split('\n')
      .find((l) => l.includes('poll failed'))!;
    expect(firstLine.trim().startsWith('{')).toBe(false);
    expect(firstLine).toMatch(/WARN/);
    expect(cli.stderr()).not.toContain('key-never-logged');
  });
});
