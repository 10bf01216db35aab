// What 'auto', 'bwrap' and 'none' decide on a host where the sandbox works, where bubblewrap is
// missing, where its namespaces are refused and on a platform without it; and that a worker
// asked for 'bwrap' refuses to start (before any request) when no sandbox can start.
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxUnavailableError } from '../../src/errors.js';
import { resolveSandboxOption } from '../../src/sandbox/options.js';
import { resolveSandbox } from '../../src/sandbox/runtime.js';
import { EnvironmentWorker } from '../../src/worker/environment-worker.js';
import { captureLogger, harness } from '../worker/helpers.js';

let tmp: string;
let refusing: string;
beforeAll(async () => {
  tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-runtime-'));
  // Stands where bubblewrap is, failing as it does where user namespaces are blocked.
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

  it("'none' is chosen: no probe, no warning", async () => {
    const c = captureLogger('debug');
    expect(await resolveSandbox(resolveSandboxOption('none'), { log: c.logger, concurrency: 4, platform: 'linux' })).toEqual({
      kind: 'none',
      chosen: true,
    });
    expect(c.lines).toEqual([]);
  });

  it.each([
    { what: 'bubblewrap missing', bwrapPath: missing, platform: 'linux', reason: 'missing', fix: 'apt-get install bubblewrap' },
    {
      what: 'namespaces refused',
      bwrapPath: () => refusing,
      platform: 'linux',
      reason: 'probe_failed',
      fix: 'unprivileged user namespaces',
    },
    { what: 'macOS', bwrapPath: missing, platform: 'darwin', reason: 'platform', fix: 'Linux VM or container' },
  ])("$what: 'auto' runs without it after one warning naming the fix; 'bwrap' refuses", async ({ bwrapPath, platform, reason, fix }) => {
    const where = typeof bwrapPath === 'function' ? bwrapPath() : bwrapPath;
    const one = captureLogger('info');
    const rt = await resolveSandbox(resolveSandboxOption({ mode: 'auto', bwrapPath: where }), {
      log: one.logger,
      concurrency: 1,
      platform,
    });
    expect(rt).toMatchObject({ kind: 'none', chosen: false });
    const warnings = one.lines.filter((l) => l.level >= 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, reason });
    expect(warnings[0]!.msg).toContain(fix);

    // Louder with several sessions in one process.
    const many = captureLogger('info');
    await resolveSandbox(resolveSandboxOption({ mode: 'auto', bwrapPath: where }), { log: many.logger, concurrency: 2, platform });
    expect(many.lines.filter((l) => l.level >= 40).map((l) => l.level)).toEqual([50]);
    expect(many.lines[0]!.msg).toContain("read and change the other sessions' folders");

    const refused = resolveSandbox(resolveSandboxOption({ mode: 'bwrap', bwrapPath: where }), {
      log: one.logger,
      concurrency: 1,
      platform,
    });
    await expect(refused).rejects.toBeInstanceOf(SandboxUnavailableError);
    await expect(refused).rejects.toMatchObject({ code: 'MAW_SANDBOX', reason, message: expect.stringContaining(fix) as string });
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
