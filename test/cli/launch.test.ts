// Pins one-sandbox-per-session: `launch --on-work` claims items and starts a child-process
// "sandbox" per item with the item's ANTHROPIC_* variables (the work secret, no environment key
// since the item has a secret, and no other ANTHROPIC_* variable of the launcher); the sandbox's
// `handle` owns the item (it stops it, with the sessions token); the launcher frees the slot only
// when the sandbox exits, never stops an item itself, and a launch command that returns at once
// does not get its session stopped. SIGTERM ends the launcher with exit 0. An item handed out
// again while its first sandbox runs gets its own tracked sandbox; close() signals and waits for all.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/internal/logger.js';
import { Launcher, SANDBOX_ENV_VARS, type SandboxExit } from '../../src/launcher/index.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { CLI_MAIN, childEnv, spawnCli, type CliRun } from './spawn-cli.js';

const SANDBOX = path.join(path.dirname(CLI_MAIN), '../../test/cli/fixtures/sandbox.mjs');
const LINGER_MS = 1_500;

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('launch: one sandbox per work item', () => {
  let dir: string;
  let records: string;
  let emu: Emulator;
  let cli: CliRun | undefined;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-launch-'));
    records = path.join(dir, 'records');
    await fs.mkdir(records);
    emu = await startEmulator({ mountRoot: dir, leaseTtlSeconds: 4 });
  });
  afterEach(async () => {
    if (cli && cli.child.exitCode === null) cli.child.kill('SIGKILL');
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const sandboxCommand = (background = false): string =>
    `'${process.execPath}' '${SANDBOX}' '${CLI_MAIN}' '${records}' ${LINGER_MS} '${dir}'${background ? ' > /dev/null 2>&1 &' : ''}`;

  it('starts a sandbox with the item variables, lets its handle own the item, and exits 0 on SIGTERM', async () => {
    cli = spawnCli(
      ['launch', '--on-work', sandboxCommand(), '--log-level', 'info'],
      childEnv({
        ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
        ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
        ANTHROPIC_BASE_URL: emu.baseURL,
        // An operator credential in the launcher's environment: the sandbox must not inherit it.
        ANTHROPIC_API_KEY: 'sk-operator-console-key',
      }),
    );
    const { sessionId, workId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo in-sandbox' } }] });
    const done = await emu.waitForSession(sessionId, { timeoutMs: 20_000 });
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['in-sandbox']);
    expect(done.workStopped).toBe(true);

    const seen = JSON.parse(await fs.readFile(path.join(records, `${workId}.json`), 'utf8')) as { vars: Record<string, string> };
    // Exactly the item's: no other ANTHROPIC_* variable of the launcher's environment reaches the sandbox.
    expect(Object.keys(seen.vars).sort()).toEqual(SANDBOX_ENV_VARS.filter((v) => v !== 'ANTHROPIC_ENVIRONMENT_KEY').sort());
    expect(JSON.stringify(seen)).not.toContain('sk-operator-console-key');
    expect(seen.vars).toMatchObject({
      ANTHROPIC_WORK_ID: workId,
      ANTHROPIC_SESSION_ID: sessionId,
      ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
      ANTHROPIC_WORK_SECRET: emu.workSecret(workId),
      ANTHROPIC_BASE_URL: emu.baseURL,
    });
    // The item was stopped by the sandbox (sessions token), never by the launcher (environment key).
    const stops = emu.requests.filter((r) => r.path.endsWith(`/work/${workId}/stop`));
    expect(stops.length).toBeGreaterThan(0);
    expect(stops.every((r) => r.credential === 'sessions_token')).toBe(true);

    await cli.waitForStderr('sandbox exited');
    const handled = JSON.parse(await fs.readFile(path.join(records, `${workId}.handled.json`), 'utf8')) as { code: number };
    expect(handled.code).toBe(0);
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
    expect(cli.stderr()).not.toContain(emu.workSecret(workId)!);
  });

  it('tracks a sandbox per launch: an item handed out again while its first sandbox runs gets a second one, and close() waits for both', async () => {
    // A slow sandbox that never heartbeats (an image still pulling): the lease lapses and the API
    // hands the same item out again while the first sandbox still runs.
    const shortLease = await startEmulator({ mountRoot: dir, leaseTtlSeconds: 1 });
    const pids: number[] = [];
    const exits: SandboxExit[] = [];
    const launcher = new Launcher({
      client: shortLease.client(),
      environmentId: shortLease.environmentId,
      environmentKey: shortLease.environmentKey,
      command: 'sleep 30',
      concurrency: 2,
      env: childEnv({}),
      stdio: 'ignore',
      killAfterMs: 10_000,
      logger: createLogger({ level: 'silent' }),
    });
    launcher.on('launched', (e) => e.pid !== undefined && pids.push(e.pid));
    launcher.on('exited', (e) => exits.push(e));
    try {
      const running = launcher.run();
      const { workId } = await shortLease.createSession({ script: [] });
      await until('the item to be launched twice', () => pids.length === 2);
      expect(shortLease.workItem(workId).deliveries).toBe(2);
      expect(launcher.running).toBe(2);
      await launcher.close();
      await running;
      // Both sandboxes got the SIGTERM and were waited for; none is left behind.
      expect(exits.map((e) => [e.workId, e.signal])).toEqual([
        [workId, 'SIGTERM'],
        [workId, 'SIGTERM'],
      ]);
      expect(launcher.running).toBe(0);
    } finally {
      for (const pid of pids) {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await shortLease.close();
    }
  });

  it('frees a slot only when the sandbox exits, and never stops an item whose launch command returned at once', async () => {
    const exits: SandboxExit[] = [];
    const launcher = new Launcher({
      client: emu.client(),
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      command: sandboxCommand(),
      concurrency: 1,
      env: childEnv({}),
      stdio: 'ignore',
      logger: createLogger({ level: 'silent' }),
    });
    launcher.on('exited', (e) => exits.push(e));
    const running = launcher.run();
    const a = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo a' } }] });
    const b = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo b' } }] });
    await emu.waitForSession(a.sessionId, { timeoutMs: 20_000 });
    // Concurrency 1: while sandbox A lingers after its session ended, B is not claimed.
    expect(emu.workItem(b.workId).deliveries).toBe(0);
    await emu.waitForSession(b.sessionId, { timeoutMs: 20_000 });
    await until('both sandboxes to exit', () => exits.length === 2);
    expect(exits.map((e) => e.workId)).toEqual([a.workId, b.workId]);
    expect(exits.every((e) => e.code === 0 && e.durationMs >= LINGER_MS)).toBe(true);
    await launcher.close();
    await running;

    // A launch command that returns at once (like `docker run -d`): the session still runs to its end.
    const detached = new Launcher({
      client: emu.client(),
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      command: sandboxCommand(true),
      env: childEnv({}),
      stdio: 'ignore',
      logger: createLogger({ level: 'silent' }),
    });
    const detachedExits: SandboxExit[] = [];
    detached.on('exited', (e) => detachedExits.push(e));
    const detachedRun = detached.run();
    const c = await emu.createSession({ script: [{ sleepMs: 500 }, { tool: 'bash', input: { command: 'echo c' } }] });
    await until('the launch command to return', () => detachedExits.length === 1);
    expect(emu.session(c.sessionId).status).not.toBe('terminated');
    const done = await emu.waitForSession(c.sessionId, { timeoutMs: 20_000 });
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['c']);
    expect(emu.requests.filter((r) => r.path.endsWith(`/work/${c.workId}/stop`)).every((r) => r.credential === 'sessions_token')).toBe(
      true,
    );
    await until('the background sandbox to finish', async () =>
      fs.access(path.join(records, `${c.workId}.handled.json`)).then(
        () => true,
        () => false,
      ),
    );
    await detached.close();
    await detachedRun;
  });
});
