// Pins that the runnable examples work as documented, each in a child process against the
// emulator: the poll daemon serves a session with a memory store and drains on SIGTERM; the
// custom-tools factory answers a custom tool call with a per-session instance; the webhook
// handler serves a session announced by a signed delivery and, on SIGTERM mid-session, ends it
// gracefully (final sync, item stopped) instead of waiting for it. The sandbox launch script parses.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { generateWebhookSecret, postWebhooksTo } from '../../src/testing/webhook-signing.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function runExample(file: string, env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO, 'examples', file)], {
    cwd: REPO,
    env: { PATH: process.env['PATH'], HOME: process.env['HOME'], LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    output: () => out,
    exited,
    async waitFor(re: RegExp, timeoutMs = 20_000): Promise<RegExpExecArray> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const m = re.exec(out);
        if (m) return m;
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`example output never matched ${String(re)}:\n${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };
}

describe('examples', () => {
  let dir: string;
  let emu: Emulator;
  let running: ReturnType<typeof runExample> | undefined;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-examples-'));
    emu = await startEmulator({ mountRoot: dir, leaseTtlSeconds: 4 });
  });
  afterEach(async () => {
    if (running && running.child.exitCode === null) running.child.kill('SIGKILL');
    running = undefined;
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const apiEnv = (): Record<string, string> => ({
    ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
    ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
    ANTHROPIC_BASE_URL: emu.baseURL,
    WORKDIR: dir,
  });

  it('poll-daemon.ts serves a session with a memory store and exits 0 on SIGTERM', async () => {
    const store = await emu.createMemoryStore({ name: 'Team Notes', memories: { '/hello.md': 'hi' } });
    running = runExample('poll-daemon.ts', apiEnv());
    const { sessionId } = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [
        { tool: 'read', input: { file_path: path.join(dir, 'team-notes/hello.md') } },
        { tool: 'write', input: { file_path: path.join(dir, 'team-notes/added.md'), content: 'from the example' } },
      ],
    });
    const done = await emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    expect(done.toolResults.map((r) => r.isError)).toEqual([false, false]);
    expect(done.toolResults[0]!.text).toContain('hi');
    expect(emu.memories(store.id)['/added.md']).toBe('from the example');
    await running.waitFor(/session ended/);
    running.child.kill('SIGTERM');
    expect(await running.exited).toBe(0);
    expect(running.output()).toContain('poll daemon stopped');
  });

  it('custom-tools.ts answers a custom tool call from its per-session tools', async () => {
    running = runExample('custom-tools.ts', apiEnv());
    const { sessionId } = await emu.createSession({
      script: [
        { tool: 'lookup_order', custom: true, input: { order_id: 'A-100' } },
        { tool: 'lookup_order', custom: true, input: { order_id: 'B-999' } },
      ],
    });
    const done = await emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['order A-100: shipped 2026-03-02', 'no order B-999']);
    const audit = await fs.readFile(path.join(dir, 'tool-audit.log'), 'utf8');
    expect(audit).toMatch(/lookup_order A-100 \(call 1 of this session\)/);
    running.child.kill('SIGTERM');
    expect(await running.exited).toBe(0);
  });

  it('webhook-handler.ts serves a session announced by a signed delivery', async () => {
    const secret = generateWebhookSecret();
    running = runExample('webhook-handler.ts', { ...apiEnv(), PORT: '0', ANTHROPIC_WEBHOOK_SIGNING_KEY: secret });
    const url = (await running.waitFor(/"url":"(http:\/\/[^"]+)"/))[1]!;
    const poster = postWebhooksTo(emu, url, secret);
    const { sessionId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo via-webhook' } }] });
    const done = await emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    await poster.settled();
    expect(poster.deliveries.map((d) => d.status)).toEqual([202]);
    expect(done.toolResults.map((r) => r.text.trim())).toEqual(['via-webhook']);
    poster.stop();
    running.child.kill('SIGTERM');
    await running.waitFor(/webhook handler stopped/);
  });

  it('webhook-handler.ts ends a running session gracefully on SIGTERM (final sync, item stopped) instead of waiting for it', async () => {
    const secret = generateWebhookSecret();
    const store = await emu.createMemoryStore({ name: 'Team Notes', memories: { '/hello.md': 'hi' } });
    running = runExample('webhook-handler.ts', { ...apiEnv(), PORT: '0', ANTHROPIC_WEBHOOK_SIGNING_KEY: secret });
    const url = (await running.waitFor(/"url":"(http:\/\/[^"]+)"/))[1]!;
    const poster = postWebhooksTo(emu, url, secret);
    const { sessionId, workId } = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      // The agent writes a note, then works for a long time: a SIGTERM arrives mid-session.
      script: [
        { tool: 'write', input: { file_path: path.join(dir, 'team-notes/late.md'), content: 'written before SIGTERM' } },
        { sleepMs: 120_000 },
      ],
    });
    const deadline = Date.now() + 20_000;
    while (emu.session(sessionId).toolResults.length === 0) {
      if (Date.now() > deadline) throw new Error(`the first tool call never ran:\n${running.output()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    poster.stop();
    running.child.kill('SIGTERM');
    await running.waitFor(/webhook handler stopped/, 20_000);
    expect(emu.workItem(workId).stopped).toBe(true);
    expect(emu.memories(store.id)['/late.md']).toBe('written before SIGTERM');
  });

  it('sandbox-per-session/Dockerfile builds the package from this checkout and runs handle as a non-root user; the Job waits >= 35 s', async () => {
    const dockerfile = await fs.readFile(path.join(REPO, 'examples/sandbox-per-session/Dockerfile'), 'utf8');
    const instructions = dockerfile.split('\n').filter((l) => l.trim() !== '' && !l.trimStart().startsWith('#'));
    const pkg = JSON.parse(await fs.readFile(path.join(REPO, 'package.json'), 'utf8')) as { name: string };
    // The package is not on the npm registry: installing it by name there fails the build.
    expect(instructions.join('\n')).not.toMatch(new RegExp(`npm install[^\\n]*["' ]${pkg.name}@`));
    expect(instructions.join('\n')).toMatch(/npm pack/);
    // Every file the build stage copies exists in the repository (the build context is its root).
    for (const line of instructions.filter((l) => /^COPY (?!--from)/.test(l))) {
      for (const src of line
        .replace(/^COPY\s+/, '')
        .split(/\s+/)
        .slice(0, -1)) {
        await expect(fs.access(path.join(REPO, src)), `${src} in "${line}"`).resolves.toBeUndefined();
      }
    }
    expect(instructions.some((l) => /^USER (?!root\b|0\b)\S+/.test(l))).toBe(true);
    expect(dockerfile).toMatch(/chown [^\n]*\/mnt\/memory/);
    expect(instructions.find((l) => l.startsWith('ENTRYPOINT'))).toMatch(/"managed-agents-worker", "handle"/);
    const job = await fs.readFile(path.join(REPO, 'examples/sandbox-per-session/k8s-job.yaml'), 'utf8');
    expect(Number(/terminationGracePeriodSeconds: (\d+)/.exec(job)?.[1])).toBeGreaterThanOrEqual(35);
  });

  it('sandbox-per-session/launch.sh is valid POSIX shell', async () => {
    await expect(promisify(execFile)('/bin/sh', ['-n', path.join(REPO, 'examples/sandbox-per-session/launch.sh')])).resolves.toBeDefined();
  });
});
