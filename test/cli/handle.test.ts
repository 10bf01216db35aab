// Pins `managed-agents-worker handle`: one item served from the ANTHROPIC_* variables in a child
// process (lease, session, stop), the exit code says how the session ended, no credential reaches
// the logs, and an agent whose bash reads /proc/$PPID/environ, /proc/$PPID/cmdline and its own
// environment finds neither the environment key nor the work secret, whether they came as
// variables or in files.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { claimOne } from '../../src/webhook/drain-queue.js';
import { scopedClient } from '../../src/worker/scoped-client.js';
import { childEnv, spawnCli } from './spawn-cli.js';

describe('managed-agents-worker handle', () => {
  let dir: string;
  let emu: Emulator;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-handle-'));
    emu = await startEmulator({ mountRoot: dir, leaseTtlSeconds: 4 });
  });
  afterEach(async () => {
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  async function claimedEnv(
    sessionOpts: Parameters<Emulator['createSession']>[0],
  ): Promise<{ env: NodeJS.ProcessEnv; workId: string; sessionId: string }> {
    const { sessionId } = await emu.createSession(sessionOpts);
    const item = await claimOne(scopedClient(emu.client(), emu.environmentKey), emu.environmentId, { workerId: 'test-launcher' });
    if (!item) throw new Error('no work item was queued');
    const env = childEnv({
      ANTHROPIC_WORK_ID: item.workId,
      ANTHROPIC_ENVIRONMENT_ID: item.environmentId,
      ANTHROPIC_SESSION_ID: item.sessionId!,
      ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
      ANTHROPIC_WORK_SECRET: item.secret ?? '',
      ANTHROPIC_BASE_URL: emu.baseURL,
    });
    return { env, workId: item.workId, sessionId };
  }

  it('serves the item from the variables, stops it, and exits 0 with the outcome on stdout', async () => {
    const { env, workId, sessionId } = await claimedEnv({ script: [{ tool: 'bash', input: { command: 'echo from-the-sandbox' } }] });
    const cli = spawnCli(['handle', '--workdir', dir, '--log-level', 'debug', '--max-idle', '2000'], env);
    const { code } = await cli.exited;
    expect(code).toBe(0);
    expect(JSON.parse(cli.stdout())).toMatchObject({ workId, sessionId, status: 'completed' });
    const done = await emu.waitForSession(sessionId, { timeoutMs: 5_000 });
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['from-the-sandbox']);
    expect(done.workStopped).toBe(true);
    const logs = cli.stderr();
    expect(logs.length).toBeGreaterThan(0);
    expect(logs).not.toContain(emu.environmentKey);
    expect(logs).not.toContain(emu.sessionsToken(workId)!);
    expect(logs).not.toContain(env['ANTHROPIC_WORK_SECRET']!);
  });

  const SNOOP = 'tr "\\0" "\\n" < /proc/$PPID/environ; echo ---; tr "\\0" " " < /proc/$PPID/cmdline; echo ---; env';
  const ways = [
    { description: 'as variables', files: false },
    { description: 'in --environment-key-file and --work-secret-file', files: true },
  ];
  it.each(ways)(
    "without a sandbox, keeps the key and the secret out of the agent's reach when they come $description",
    async ({ files }) => {
      const { env, sessionId } = await claimedEnv({ script: [{ tool: 'bash', input: { command: SNOOP } }] });
      const key = env['ANTHROPIC_ENVIRONMENT_KEY']!;
      const secret = env['ANTHROPIC_WORK_SECRET']!;
      const args = ['handle', '--workdir', dir, '--log-level', 'warn', '--max-idle', '1000', '--sandbox', 'none'];
      if (files) {
        const keyFile = path.join(dir, 'environment-key');
        const secretFile = path.join(dir, 'work-secret');
        await fs.writeFile(keyFile, `${key}\n`, { mode: 0o600 });
        await fs.writeFile(secretFile, secret, { mode: 0o600 });
        delete env['ANTHROPIC_ENVIRONMENT_KEY'];
        delete env['ANTHROPIC_WORK_SECRET'];
        args.push('--environment-key-file', keyFile, '--work-secret-file', secretFile);
      }
      const cli = spawnCli(args, env);
      expect((await cli.exited).code).toBe(0);
      const seen = emu
        .session(sessionId)
        .toolResults.map((r) => r.text)
        .join('\n');
      const [environ, cmdline, ownEnv] = seen.split('---\n');
      // The agent did read the three places: its parent is this handle process.
      expect(cmdline).toContain('handle');
      expect(environ).toContain('PATH=');
      expect(ownEnv).toContain('PATH=');
      expect(seen).not.toContain(key);
      expect(seen).not.toContain(secret);
      expect(seen).not.toMatch(/ANTHROPIC_(ENVIRONMENT_KEY|WORK_SECRET)/);
    },
  );

  it('in the sandbox, the agent sees neither handle nor its credential files, even inside its workdir', async () => {
    const keyFile = path.join(dir, 'environment-key');
    const secretFile = path.join(dir, 'work-secret');
    const { env, sessionId } = await claimedEnv({
      script: [{ tool: 'bash', input: { command: `${SNOOP}; echo ---; cat ${keyFile} ${secretFile}` } }],
    });
    const key = env['ANTHROPIC_ENVIRONMENT_KEY']!;
    const secret = env['ANTHROPIC_WORK_SECRET']!;
    await fs.writeFile(keyFile, `${key}\n`, { mode: 0o600 });
    await fs.writeFile(secretFile, secret, { mode: 0o600 });
    delete env['ANTHROPIC_ENVIRONMENT_KEY'];
    delete env['ANTHROPIC_WORK_SECRET'];
    const cli = spawnCli(
      [
        'handle',
        '--workdir',
        dir,
        '--log-level',
        'warn',
        '--max-idle',
        '1000',
        '--sandbox',
        'bwrap',
        '--environment-key-file',
        keyFile,
        '--work-secret-file',
        secretFile,
      ],
      env,
    );
    expect((await cli.exited).code).toBe(0);
    const seen = emu
      .session(sessionId)
      .toolResults.map((r) => r.text)
      .join('\n');
    const [, cmdline] = seen.split('---\n');
    // Its parent is the sandbox's tool host; the handle process is not in its world.
    expect(cmdline).toContain('tool-host.cjs');
    expect(seen).not.toContain('cli/main');
    expect(seen).not.toContain(key);
    expect(seen).not.toContain(secret);
    expect(seen).not.toMatch(/ANTHROPIC_/);
    // The files are still there for the operator.
    expect(await fs.readFile(keyFile, 'utf8')).toBe(`${key}\n`);
  });

  it('exits 10 when the session fails: stores attached but no secret forwarded', async () => {
    const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'a' } });
    const { env, sessionId } = await claimedEnv({ resources: [{ memoryStoreId: store.id }], secret: false });
    const cli = spawnCli(['handle', '--workdir', dir, '--log-level', 'silent'], env);
    const { code } = await cli.exited;
    expect(code).toBe(10);
    const outcome = JSON.parse(cli.stdout()) as { status: string; error: string };
    expect(outcome.status).toBe('failed');
    expect(outcome.error).toContain('secret');
    expect(emu.workItem(sessionId).stopped).toBe(true);
  });

  it('ends the session gracefully on SIGTERM, stops the item and exits 0', async () => {
    const { env, workId, sessionId } = await claimedEnv({
      script: [{ tool: 'bash', input: { command: 'echo before' } }, { sleepMs: 60_000 }],
    });
    const cli = spawnCli(['handle', '--workdir', dir, '--log-level', 'info'], env);
    const deadline = Date.now() + 15_000;
    while (emu.session(sessionId).toolResults.length === 0) {
      if (Date.now() > deadline) throw new Error('the first tool call never ran');
      await new Promise((r) => setTimeout(r, 50));
    }
    cli.child.kill('SIGTERM');
    const { code } = await cli.exited;
    expect(code).toBe(0);
    expect(JSON.parse(cli.stdout())).toMatchObject({ workId, status: 'aborted' });
    expect(emu.workItem(workId).stopped).toBe(true);
  });
});
