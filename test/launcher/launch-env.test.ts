// Pins the environment `launch` gives each sandbox command, through the CLI as an operator runs it:
// the item's variables (the work secret, no environment key for an item that has a secret), the
// allow-listed variables, and a variable named with --pass-env; not the environment key nor any
// other variable of the launcher's environment.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { childEnv, spawnCli, type CliRun } from '../cli/spawn-cli.js';

async function until<T>(what: string, read: () => Promise<T | undefined>, timeoutMs = 40_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('launch --pass-env', () => {
  let dir: string;
  let emu: Emulator;
  let cli: CliRun | undefined;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-launch-env-'));
    emu = await startEmulator({ mountRoot: dir });
  });
  afterEach(async () => {
    if (cli && cli.child.exitCode === null) cli.child.kill('SIGKILL');
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('gives the sandbox command the item, the allow-list and the named variables, nothing else', async () => {
    const out = path.join(dir, 'env.txt');
    cli = spawnCli(
      ['launch', '--on-work', `env > '${out}.tmp' && mv '${out}.tmp' '${out}'`, '--pass-env', 'SANDBOX_IMAGE', '--log-level', 'warn'],
      childEnv({
        ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
        ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
        ANTHROPIC_BASE_URL: emu.baseURL,
        SANDBOX_IMAGE: 'registry.local/sandbox:1',
        DB_PASSWORD: 'launcher-only-secret-93ab',
        LANG: 'C.UTF-8',
      }),
    );
    const { workId, sessionId } = await emu.createSession({ script: [] });
    const text = await until('the sandbox command to write its environment', () => fs.readFile(out, 'utf8').catch(() => undefined));
    const env = Object.fromEntries(
      text
        .trim()
        .split('\n')
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    expect(env).toMatchObject({
      ANTHROPIC_WORK_ID: workId,
      ANTHROPIC_SESSION_ID: sessionId,
      ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
      ANTHROPIC_BASE_URL: emu.baseURL,
      ANTHROPIC_WORK_SECRET: emu.workSecret(workId),
      SANDBOX_IMAGE: 'registry.local/sandbox:1',
      LANG: 'C.UTF-8',
      PATH: process.env['PATH'],
    });
    expect(env).not.toHaveProperty('ANTHROPIC_ENVIRONMENT_KEY');
    expect(env).not.toHaveProperty('DB_PASSWORD');
    expect(text).not.toContain(emu.environmentKey);
    emu.archiveSession(sessionId);
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
  });

  it('refuses to name an item variable, as a configuration error', async () => {
    cli = spawnCli(
      ['launch', '--on-work', 'true', '--pass-env', 'ANTHROPIC_WORK_SECRET'],
      childEnv({
        ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
        ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
        ANTHROPIC_BASE_URL: emu.baseURL,
      }),
    );
    const { code } = await cli.exited;
    expect(code).toBe(3);
    expect(cli.stderr()).toContain('ANTHROPIC_WORK_SECRET is set per item by the launcher');
    expect(cli.stderr()).not.toContain(emu.environmentKey);
  });
});
