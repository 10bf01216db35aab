// What 'auto', 'bwrap' and 'none' decide on a host where the sandbox works, where bubblewrap is
// missing, where its namespaces are refused and on a platform without it: 'auto' on Linux refuses
// to serve sessions from a queue without a sandbox (run(), readyToServe(), handleItem() at
// concurrency above 1), before any request; it serves one session per process after a warning;
// off Linux it runs without one after a warning. 'bwrap' refuses everywhere.
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxUnavailableError } from '../../src/errors.js';
import { resolveSandboxOption } from '../../src/sandbox/options.js';
import { resolveSandbox, sandboxForServing } from '../../src/sandbox/resolve.js';
import { claimOne } from '../../src/webhook/drain-queue.js';
import { EnvironmentWorker } from '../../src/worker/environment-worker.js';
import { scopedClient } from '../../src/worker/scoped-client.js';
import { captureLogger, harness } from '../worker/helpers.js';

let tmp: string;
let refusing: string;
beforeAll(async () => {
  tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-runtime-'));
  // Stands where bubblewrap is, failing as it does where the user namespace gets no uid map.
  refusing = path.join(tmp, 'bwrap');
  await fsp.writeFile(refusing, '#!/bin/sh\necho "bwrap: setting up uid map: Permission denied" >&2\nexit 1\n', { mode: 0o755 });
});
afterAll(async () => {
  await fsp.rm(tmp, { recursive: true, force: true });
});

const missing = '/nonexistent/bin/bwrap';

describe('resolveSandbox', () => {
  it("'auto' takes the sandbox where it works, and says so at info", async () => {
    const c = captureLogger('info');
    const rt = await resolveSandbox(resolveSandboxOption('auto'), { log: c.logger, concurrency: 1 });
    expect(rt.kind).toBe('bwrap');
    expect(c.lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it("'none' is chosen: no probe, no warning, served everywhere", async () => {
    const c = captureLogger('debug');
    const rt = await resolveSandbox(resolveSandboxOption('none'), { log: c.logger, concurrency: 4, platform: 'linux' });
    expect(rt).toEqual({ kind: 'none', chosen: true });
    expect(sandboxForServing(rt, 'sessions', c.logger)).toBe(rt);
    expect(c.lines).toEqual([]);
  });

  it.each([
    { what: 'bubblewrap missing', bwrapPath: missing, reason: 'missing', fix: 'apt-get install bubblewrap' },
    { what: 'no uid map', bwrapPath: () => refusing, reason: 'uid_map', fix: 'uid map' },
  ])(
    "$what on Linux: 'auto' refuses to serve sessions with the cause and fix; one session runs after a warning; 'bwrap' refuses",
    async ({ bwrapPath, reason, fix }) => {
      const where = typeof bwrapPath === 'function' ? bwrapPath() : bwrapPath;
      const c = captureLogger('info');
      const rt = await resolveSandbox(resolveSandboxOption({ mode: 'auto', bwrapPath: where }), {
        log: c.logger,
        concurrency: 2,
        platform: 'linux',
      });
      expect(rt).toMatchObject({ kind: 'none', chosen: false });
      // Deciding logs nothing: the caller refuses or warns.
      expect(c.lines.filter((l) => l.level >= 40)).toEqual([]);

      let refusal: unknown;
      try {
        sandboxForServing(rt, 'sessions', c.logger);
      } catch (e) {
        refusal = e;
      }
      expect(refusal).toBeInstanceOf(SandboxUnavailableError);
      expect(refusal).toMatchObject({ code: 'MAW_SANDBOX', reason });
      const message = (refusal as Error).message;
      expect(message).toContain(fix);
      expect(message).toContain("sandbox: 'none'");

      // One session per process: served without, after one warning (not repeated).
      expect(sandboxForServing(rt, 'one-session', c.logger)).toBe(rt);
      sandboxForServing(rt, 'one-session', c.logger);
      const warnings = c.lines.filter((l) => l.level >= 40);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.msg).toContain('serves one session');
      expect(warnings[0]!.msg).toContain(fix);

      const refused = resolveSandbox(resolveSandboxOption({ mode: 'bwrap', bwrapPath: where }), {
        log: c.logger,
        concurrency: 1,
        platform: 'linux',
      });
      await expect(refused).rejects.toBeInstanceOf(SandboxUnavailableError);
      await expect(refused).rejects.toMatchObject({ code: 'MAW_SANDBOX', reason, message: expect.stringContaining(fix) as string });
    },
  );

  it("off Linux (macOS): 'auto' runs without a sandbox after one warning, louder with several sessions; 'bwrap' refuses", async () => {
    const one = captureLogger('info');
    const rt = await resolveSandbox(resolveSandboxOption({ mode: 'auto', bwrapPath: missing }), {
      log: one.logger,
      concurrency: 1,
      platform: 'darwin',
    });
    expect(rt).toMatchObject({ kind: 'none', chosen: false });
    expect(sandboxForServing(rt, 'sessions', one.logger)).toBe(rt);
    const warnings = one.lines.filter((l) => l.level >= 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, reason: 'platform' });
    expect(warnings[0]!.msg).toContain('Linux VM or container');

    const many = captureLogger('info');
    await resolveSandbox(resolveSandboxOption({ mode: 'auto', bwrapPath: missing }), {
      log: many.logger,
      concurrency: 2,
      platform: 'darwin',
    });
    expect(many.lines.filter((l) => l.level >= 40).map((l) => l.level)).toEqual([50]);
    expect(many.lines[0]!.msg).toContain("read and change the other sessions' folders");

    await expect(
      resolveSandbox(resolveSandboxOption({ mode: 'bwrap', bwrapPath: missing }), { log: one.logger, concurrency: 1, platform: 'darwin' }),
    ).rejects.toMatchObject({ code: 'MAW_SANDBOX', reason: 'platform' });
  });
});

describe("a worker with the default sandbox: 'auto' where no sandbox can start (fail-closed)", () => {
  it('run() and readyToServe() reject before any request; the emulator shows no item claimed or acknowledged', async () => {
    const h = await harness();
    try {
      const { workId } = await h.emu.createSession({ script: [{ tool: 'bash', input: { command: 'touch /tmp/x' } }] });
      const worker = h.worker({ sandbox: { bwrapPath: missing }, concurrency: 2 });
      await expect(worker.run()).rejects.toMatchObject({ code: 'MAW_SANDBOX', reason: 'missing' });
      await expect(worker.readyToServe()).rejects.toMatchObject({ code: 'MAW_SANDBOX', reason: 'missing' });
      // Not stuck as running: a second run() fails for the same reason.
      await expect(worker.run()).rejects.toMatchObject({ code: 'MAW_SANDBOX' });
      expect(h.emu.requests).toEqual([]);
      expect(h.emu.workItem(workId)).toMatchObject({ deliveries: 0, acknowledged: false });
    } finally {
      await h.cleanup();
    }
  });

  it('handleItem() at concurrency above 1 (sessions side by side) rejects before any request', async () => {
    const h = await harness();
    try {
      const worker = h.worker({ sandbox: { bwrapPath: missing }, concurrency: 2 });
      await expect(
        worker.handleItem({ workId: 'w', environmentId: h.emu.environmentId, sessionId: 's', workSecret: 'x' }),
      ).rejects.toMatchObject({ code: 'MAW_SANDBOX', reason: 'missing' });
      expect(h.emu.requests).toEqual([]);
    } finally {
      await h.cleanup();
    }
  });

  it('handleItem() on a worker of concurrency 1 (one session per process) serves the session without a sandbox, after a warning', async () => {
    const h = await harness();
    try {
      const { sessionId } = await h.emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo served' } }] });
      const item = await claimOne(scopedClient(h.emu.client(), h.emu.environmentKey), h.emu.environmentId, { workerId: 'launcher' });
      if (!item) throw new Error('no work item was queued');
      const worker = h.worker({ sandbox: { bwrapPath: missing }, concurrency: 1 });
      const outcome = await worker.handleItem({
        workId: item.workId,
        environmentId: item.environmentId,
        sessionId,
        ...(item.secret ? { workSecret: item.secret } : {}),
      });
      expect(outcome.status).toBe('completed');
      const done = await h.emu.waitForSession(sessionId);
      expect(done.toolResults.map((r) => r.text.trim())).toEqual(['served']);
      expect(h.capture.lines.some((l) => l.level === 40 && l.msg.includes('serves one session'))).toBe(true);
    } finally {
      await h.cleanup();
    }
  });

  it('a start-up step that throws leaves the worker able to run again (no "already running")', async () => {
    const h = await harness();
    try {
      const worker = h.worker({ sandbox: 'none' }, { memory: { sweep: () => Promise.reject(new Error('sweep broke')) } as never });
      await expect(worker.run()).rejects.toThrow('sweep broke');
      await expect(worker.run()).rejects.toThrow('sweep broke');
    } finally {
      await h.cleanup();
    }
  });
});

describe("a worker with sandbox: 'bwrap' where no sandbox can start", () => {
  it('run() and handleItem() reject with SandboxUnavailableError before sending anything', async () => {
    const h = await harness();
    try {
      const worker = h.worker({ sandbox: { mode: 'bwrap', bwrapPath: missing } });
      await expect(worker.run()).rejects.toMatchObject({ code: 'MAW_SANDBOX', reason: 'missing' });
      await expect(
        worker.handleItem({ workId: 'w', environmentId: h.emu.environmentId, sessionId: 's', workSecret: 'x' }),
      ).rejects.toMatchObject({
        code: 'MAW_SANDBOX',
      });
      expect(h.emu.requests).toEqual([]);
    } finally {
      await h.cleanup();
    }
  });

  it('refuses bad sandbox options with one line naming the option', () => {
    const client = new Anthropic({ apiKey: 'sk-unused', baseURL: 'http://127.0.0.1:9' });
    const make = (sandbox: unknown) => () => new EnvironmentWorker({ client, sandbox: sandbox as never });
    for (const bad of [
      'docker',
      { env: ['ANTHROPIC_API_KEY'] },
      { readOnlyPaths: ['relative/dir'] },
      { toolTimeoutMs: 5 },
      { mode: 'none' },
      { unknown: 1 },
    ]) {
      expect(make(bad)).toThrow(/sandbox: expected 'auto', 'bwrap', 'none' or \{ mode/);
    }
  });
});
