// Pins least privilege for launched sandboxes, end to end: a real Launcher starts
// `managed-agents-worker handle` (the CLI from source, in a child process) for an item that carries
// a secret, against the emulator, while the launcher's own environment holds the environment key
// and an operator secret. The agent's bash reads its parent's (handle's) /proc environ and cmdline,
// its own environment and the environ of the sandbox command's shell (what the launcher handed
// over): the environment key and the operator secret appear in none of the tool results, none of
// the session's events and none of the sandbox's log lines, yet the session is served, heartbeated,
// its memory store mounted and synced, and its item stopped with the sessions token alone. An item
// without a secret gets the key in its sandbox's environment (never its command line), and the
// launcher says so.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/internal/logger.js';
import { Launcher, type SandboxExit } from '../../src/launcher/index.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { CLI_MAIN, childEnv } from '../cli/spawn-cli.js';
import { captureLogger } from '../worker/helpers.js';

const OPERATOR_SECRET = 'operator-db-password-5b1e7c0d9a';
const onLinux = process.platform === 'linux';

describe.runIf(onLinux)('a sandbox started by the launcher', () => {
  let dir: string;
  let emu: Emulator;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-sandbox-priv-'));
    emu = await startEmulator({ mountRoot: dir, leaseTtlSeconds: 4 });
  });
  afterEach(async () => {
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("never lets the agent read the environment key from /proc/$PPID/environ, /proc/$PPID/cmdline, env or the sandbox command's environ", async () => {
    const logFile = path.join(dir, 'sandbox.log');
    const workdir = path.join(dir, 'work');
    await fs.mkdir(workdir);
    const exits: SandboxExit[] = [];
    const launcher = new Launcher({
      client: emu.client(),
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      // `handle` as an operator's sandbox command runs it; its logs (debug and up) go to a file. The
      // shell stays as handle's parent (it has more to do after it), holding the environment exactly
      // as the launcher passed it, whatever handle does with its own. `--sandbox none`: this test
      // shows what the launcher hands over, so the agent must be able to look (in handle's own
      // sandbox it sees neither handle nor the shell; test/cli/handle.test.ts covers that).
      command: `'${process.execPath}' --import tsx '${CLI_MAIN}' handle --sandbox none --workdir '${workdir}' --max-idle 2000 --log-level debug >> '${logFile}' 2>&1; exit $?`,
      // The launcher's environment as an operator sets it: the key, the id and an unrelated secret.
      env: childEnv({
        ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
        ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
        OPERATOR_DB_PASSWORD: OPERATOR_SECRET,
      }),
      stdio: 'ignore',
      logger: createLogger({ level: 'silent' }),
    });
    launcher.on('exited', (e) => exits.push(e));
    const launched: boolean[] = [];
    launcher.on('launched', (e) => launched.push(e.environmentKeyPassed));
    const running = launcher.run();
    try {
      // A memory store too: mounting and syncing it must work with the sessions token alone.
      const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } });
      const storeDir = path.join(dir, 'notes');
      const { sessionId, workId } = await emu.createSession({
        resources: [{ memoryStoreId: store.id }],
        script: [
          { tool: 'bash', input: { command: "tr '\\0' '\\n' < /proc/$PPID/environ" } },
          { tool: 'bash', input: { command: "tr '\\0' ' ' < /proc/$PPID/cmdline" } },
          { tool: 'bash', input: { command: 'env' } },
          { tool: 'bash', input: { command: "tr '\\0' '\\n' < /proc/$(awk '{print $4}' /proc/$PPID/stat)/environ" } },
          { tool: 'bash', input: { command: `echo from-the-sandbox > '${storeDir}/b.md'` } },
        ],
      });
      const done = await emu.waitForSession(sessionId, { timeoutMs: 45_000 });
      await new Promise<void>((resolve) => {
        if (exits.length > 0) resolve();
        else launcher.once('exited', () => resolve());
      });
      expect(exits[0]?.code).toBe(0);

      const [environ, cmdline, ownEnv, sandboxEnviron, write] = done.toolResults.map((r) => r.text);
      expect(write?.trim()).toBe('(no output)');
      expect(emu.memories(store.id)).toEqual({ '/a.md': 'A', '/b.md': 'from-the-sandbox\n' });
      // The reads reached the right process: handle's environment and command line, as the agent sees them.
      expect(environ).toContain(`ANTHROPIC_WORK_ID=${workId}`);
      expect(environ).toContain(`ANTHROPIC_SESSION_ID=${sessionId}`);
      expect(cmdline).toContain(' handle ');
      // And the sandbox command's shell, which holds what the launcher handed over.
      expect(sandboxEnviron).toContain(`ANTHROPIC_WORK_SECRET=${emu.workSecret(workId)}`);
      expect(ownEnv).toContain('PATH=');

      const events = JSON.stringify(emu.events(sessionId));
      const logs = await fs.readFile(logFile, 'utf8');
      expect(logs.length).toBeGreaterThan(0);
      const places = [
        ['/proc/$PPID/environ', environ],
        ['/proc/$PPID/cmdline', cmdline],
        ['env', ownEnv],
        ["the sandbox command's /proc/<pid>/environ", sandboxEnviron],
        ['session events', events],
        ['sandbox logs', logs],
      ] as const;
      for (const [what, secret] of [
        ['environment key', emu.environmentKey],
        ['operator secret', OPERATOR_SECRET],
      ] as const) {
        for (const [where, text] of places) {
          expect(text, where).toBeDefined();
          expect(text!.includes(secret), `${what} found in ${where}`).toBe(false);
        }
      }
      // No variable outside the allow-list reached the sandbox.
      expect(environ).not.toContain('OPERATOR_DB_PASSWORD=');
      expect(launched).toEqual([false]);

      // Served with the sessions token alone: every item call the sandbox made used it.
      expect(done.workStopped).toBe(true);
      const itemCalls = emu.requests.filter((r) => r.path.includes(`/work/${workId}/`) && /heartbeat|stop/.test(r.route));
      expect(itemCalls.some((r) => r.route.includes('heartbeat'))).toBe(true);
      expect(new Set(itemCalls.map((r) => r.credential))).toEqual(new Set(['sessions_token']));
      const memoryCalls = emu.requests.filter((r) => r.path.startsWith(`/v1/memory_stores/${store.id}`));
      expect(memoryCalls.length).toBeGreaterThan(0);
      expect(new Set(memoryCalls.map((r) => r.credential))).toEqual(new Set(['sessions_token']));
    } finally {
      await launcher.close();
      await running;
    }
  });

  it('hands the environment key to the sandbox of an item without a secret, in its environment only, and warns', async () => {
    const out = path.join(dir, 'sandbox.txt');
    const capture = captureLogger('info');
    const launched: boolean[] = [];
    const launcher = new Launcher({
      client: emu.client(),
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      command: `{ env; echo CMDLINE; tr '\\0' ' ' < /proc/$$/cmdline; } > '${out}.tmp' && mv '${out}.tmp' '${out}'`,
      env: childEnv({}),
      stdio: 'ignore',
      logger: capture.logger,
    });
    launcher.on('launched', (e) => launched.push(e.environmentKeyPassed));
    const running = launcher.run();
    try {
      const { sessionId } = await emu.createSession({ script: [], secret: false });
      const deadline = Date.now() + 20_000;
      let text: string | undefined;
      while (text === undefined) {
        if (Date.now() > deadline) throw new Error('the sandbox command never wrote its output');
        text = await fs.readFile(out, 'utf8').catch(() => undefined);
        if (text === undefined) await new Promise((r) => setTimeout(r, 50));
      }
      const [envText, cmdline] = text.split('CMDLINE');
      expect(envText).toContain(`ANTHROPIC_ENVIRONMENT_KEY=${emu.environmentKey}`);
      expect(envText).not.toContain('ANTHROPIC_WORK_SECRET=');
      expect(cmdline).toContain('/bin/sh -c');
      expect(cmdline).not.toContain(emu.environmentKey);
      expect(launched).toEqual([true]);
      expect(capture.lines.some((l) => l.level === 40 && l.msg.includes('no usable secret'))).toBe(true);
      for (const raw of capture.raw) expect(raw).not.toContain(emu.environmentKey);
      // One pid key per line: the process's own (pino's), the sandbox's under its own name.
      const launchedLine = capture.raw.find((l) => l.includes('sandbox launched'))!;
      expect(launchedLine.match(/"pid":/g)).toHaveLength(1);
      expect(launchedLine).toMatch(/"sandbox_pid":\d+/);
      emu.archiveSession(sessionId);
    } finally {
      await launcher.close();
      await running;
    }
  });
});
