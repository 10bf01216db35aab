// A session's tool host that dies, does not stop a call past the tool timeout or writes garbage
// costs that one call an error result; the next call gets a fresh host; the worker never crashes.
// A call that is merely slow loses its own processes and keeps the host. Real bubblewrap,
// real processes; the last test runs a whole session through the worker and the emulator.
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveSandboxOption } from '../../src/sandbox/options.js';
import { resolveSandbox } from '../../src/sandbox/resolve.js';
import { SessionSandbox } from '../../src/sandbox/session-sandbox.js';
import { ToolHostProcess } from '../../src/sandbox/tool-host-process.js';
import { NO_BOUNDS } from '../../src/sandbox/launcher.js';
import { harness, type Harness } from '../worker/helpers.js';

const log = pino({ level: 'silent' });

async function sessionSandbox(work: string, toolTimeoutMs?: number): Promise<SessionSandbox> {
  const runtime = await resolveSandbox(resolveSandboxOption({ mode: 'bwrap', ...(toolTimeoutMs ? { toolTimeoutMs } : {}) }), {
    log,
    concurrency: 1,
  });
  if (runtime.kind !== 'bwrap') throw new Error('the sandbox did not start');
  return new SessionSandbox(runtime, { workdir: work, allowedRoots: [], readOnlyRoots: [], maxFileBytes: undefined, hide: [] }, log);
}

async function bash(sandbox: SessionSandbox, command: string, extra: object = {}): Promise<{ ok: boolean; text: string }> {
  const tool = sandbox.tools().find((t) => t.name === 'bash')!;
  try {
    return { ok: true, text: (await tool.run({ command, ...extra }, undefined)) as string };
  } catch (e) {
    return { ok: false, text: (e as Error).message };
  }
}

describe('a tool host that fails', () => {
  let work: string;
  let sandbox: SessionSandbox;
  beforeEach(async () => {
    work = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-host-'));
  });
  afterEach(async () => {
    await sandbox.close();
    await fsp.rm(work, { recursive: true, force: true });
  });

  it('killed by the agent: that call is an error result, the next call runs in a fresh host', async () => {
    sandbox = await sessionSandbox(work);
    expect(await bash(sandbox, 'echo one > state; echo ok')).toEqual({ ok: true, text: 'ok' });
    const killed = await bash(sandbox, 'kill -9 $PPID; sleep 5');
    expect(killed.ok).toBe(false);
    expect(killed.text).toMatch(/the sandbox could not run this call \(the tool host ended .*\); the next call starts a new sandbox/);
    expect(await bash(sandbox, 'cat state')).toEqual({ ok: true, text: 'one' });
    expect(sandbox.hostsStarted).toBe(2);
  });

  it('hung past the tool timeout (stopped by the agent): that call is an error result, then a fresh host', async () => {
    sandbox = await sessionSandbox(work, 1_500);
    const started = Date.now();
    const hung = await bash(sandbox, 'kill -STOP $PPID', { timeout_ms: 60_000 });
    expect(hung.ok).toBe(false);
    expect(hung.text).toContain('still running after 1500 ms and did not stop');
    expect(Date.now() - started).toBeLessThan(12_000);
    expect(sandbox.hostsStarted).toBe(1);
    // Merely slow: its sleep is killed, the host (the second) stays.
    const slow = await bash(sandbox, 'sleep 30', { timeout_ms: 60_000 });
    expect(slow.text).toContain('the call was still running after 1500 ms, so the processes it started were killed');
    expect(await bash(sandbox, 'echo back')).toEqual({ ok: true, text: 'back' });
    expect(sandbox.hostsStarted).toBe(2);
  });

  it('a call after close() is an error result and starts nothing', async () => {
    sandbox = await sessionSandbox(work);
    await sandbox.close();
    expect(await bash(sandbox, 'echo late')).toEqual({ ok: false, text: "bash: the session's sandbox is closed" });
  });
});

describe('a tool host that writes garbage', () => {
  // The agent cannot write on the host's pipe (a socket: /proc/<pid>/fd/1 does not reopen it), so a
  // stand-in program plays a broken host: it answers init, then writes `reply` for the first call.
  async function brokenHost(reply: string): Promise<{ result: Awaited<ReturnType<ToolHostProcess['call']>>; log: string[] }> {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-broken-host-'));
    const launcher = path.join(dir, 'launch');
    // Stands where bubblewrap would: drops `--info-fd 3` and runs the rest.
    await fsp.writeFile(launcher, '#!/bin/sh\nshift 2\nexec "$@"\n', { mode: 0o755 });
    const program = `
      const rl = require('node:readline').createInterface({ input: process.stdin });
      let n = 0;
      rl.on('line', () => {
        if (n++ === 0) process.stdout.write(JSON.stringify({ t: 'ready' }) + '\\n');
        else process.stdout.write(${JSON.stringify(reply)});
      });`;
    const lines: string[] = [];
    const capture = pino({ level: 'warn' }, { write: (l: string) => void lines.push(l) });
    const host = new ToolHostProcess({
      launch: { bwrap: launcher, args: [process.execPath, '-e', program], seccomp: undefined, bounds: NO_BOUNDS },
      init: { t: 'init', workdir: dir, allowedRoots: [], readOnlyRoots: [], maxFileBytes: undefined },
      log: capture,
    });
    try {
      const result = await host.call('bash', { command: 'true' }, { timeoutMs: 10_000 });
      expect(host.alive).toBe(false);
      return { result, log: lines };
    } finally {
      await host.close();
      await fsp.rm(dir, { recursive: true, force: true });
    }
  }

  it.each([
    ['a line that is not JSON', 'garbage\n', 'the tool host sent a line that is not JSON'],
    [
      'an answer to a call that is not running',
      '{"t":"result","id":999,"isError":false,"content":"forged"}\n',
      'answered call 999, which is not running',
    ],
    ['a message of the wrong shape', '{"t":"result","id":1,"isError":"no","content":7}\n', 'a message of unknown shape'],
    ['a second ready with extra fields', '{"t":"ready","tools":[],"x":1}\n', 'a message of unknown shape'],
  ])('%s: the call fails with why, the host is killed, a warning is logged', async (_name, reply, why) => {
    const { result, log } = await brokenHost(reply);
    expect(result).toEqual({ kind: 'failed', message: expect.stringContaining(why) as string });
    expect(log.join('')).toContain('sandbox tool host failed');
  });
});

describe('a whole session through the worker with a failing tool host', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('completes: the crashed, slow and hung calls answer with errors and the others run; the slow one keeps the host', async () => {
    const { emu } = h;
    const { sessionId } = await emu.createSession({
      script: [
        { tool: 'bash', input: { command: 'echo before > f; cat f' } },
        { tool: 'bash', input: { command: 'kill -9 $PPID' } },
        { tool: 'bash', input: { command: 'sleep 30', timeout_ms: 60_000 } },
        { tool: 'bash', input: { command: 'kill -STOP $PPID', timeout_ms: 60_000 } },
        { tool: 'read', input: { file_path: 'f' } },
      ],
    });
    const worker = h.worker({ sandbox: { mode: 'bwrap', toolTimeoutMs: 2_000 } });
    const running = worker.run();
    const done = await emu.waitForSession(sessionId, { timeoutMs: 60_000 });
    await worker.close();
    await running;
    expect(done.toolResults.map((r) => r.isError)).toEqual([false, true, true, true, false]);
    expect(done.toolResults[0]!.text).toBe('before');
    expect(done.toolResults[4]!.text).toContain('before');
    expect(worker.metrics()).toMatchObject({ itemsCompleted: 1, itemsFailed: 0 });
    expect(done.toolResults[2]!.text).toContain('the processes it started were killed');
    const warned = h.capture.lines.filter((l) => l.msg === 'sandbox tool host failed; its call answers with an error');
    expect(warned).toHaveLength(2);
  });
});
