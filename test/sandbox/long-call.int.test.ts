// SLOW (about 135 s; in `npm test`, in a file of its own so it runs beside the other files): a
// bash command of 130 s in the sandbox, with `toolTimeoutMs` left to its default (the installed
// SDK runner's own per-call bound), returns its own output, and the next call still has the shell's
// exports, working folder and `/tmp`. The SDK's own bounds allow it from 1.16 (bash 295 s, the
// runner 325 s). Before 1.16 the runner and bash both stop a call at 120 s, so the command could
// not finish under the official worker either: there the test checks the bound only.
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveSandboxOption } from '../../src/sandbox/options.js';
import { INSTALLED_SDK_VERSION, runnerToolTimeoutMs } from '../../src/sandbox/sdk-bounds.js';
import type { SessionSandbox } from '../../src/sandbox/session-sandbox.js';
import { run, sessionSandbox, thread } from './threads.js';

const LONG_S = 130;

describe(`a ${LONG_S}-second bash command in the sandbox (SDK ${INSTALLED_SDK_VERSION})`, () => {
  let work: string;
  let sandbox: SessionSandbox | undefined;
  beforeEach(async () => {
    work = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-long-call-'));
  });
  afterEach(async () => {
    await sandbox?.close();
    await fsp.rm(work, { recursive: true, force: true });
  });

  it('the default bound is the runner’s own', () => {
    expect(resolveSandboxOption('bwrap').toolTimeoutMs).toBe(runnerToolTimeoutMs());
  });

  it.runIf(runnerToolTimeoutMs() > LONG_S * 1_000)(
    'returns its own output; the next call still sees the exports, the working folder and /tmp',
    async () => {
      sandbox = await sessionSandbox(work);
      const a = thread('main');
      const setup = await run(sandbox, 'bash', { command: 'export KEPT=yes; mkdir -p /tmp/w; cd /tmp/w; echo in-tmp > f; echo set' }, a);
      expect(setup).toEqual({ ok: true, text: 'set' });
      const started = Date.now();
      const long = await run(sandbox, 'bash', { command: `sleep ${LONG_S}; echo "finished $KEPT"` }, a);
      expect(long).toEqual({ ok: true, text: 'finished yes' });
      expect(Date.now() - started).toBeGreaterThanOrEqual(LONG_S * 1_000);
      expect(await run(sandbox, 'bash', { command: 'echo "$KEPT $(pwd) $(cat f)"' }, a)).toEqual({ ok: true, text: 'yes /tmp/w in-tmp' });
      expect(sandbox.hostsStarted).toBe(1);
    },
    (LONG_S + 60) * 1_000,
  );
});
