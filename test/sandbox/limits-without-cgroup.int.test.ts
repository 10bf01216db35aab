// Where the worker makes no cgroup (no state folder here, as where none may be made), a session's
// sandbox still runs bounded: its CPU weight as niceness (50 is niceness 3, 100 or more none), its
// open files, its OOM score and no core files, all set by the launcher's wrapper before bubblewrap.
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSandboxOption } from '../../src/sandbox/options.js';
import { resolveSandbox } from '../../src/sandbox/resolve.js';
import { SessionSandbox } from '../../src/sandbox/session-sandbox.js';
import type { SandboxLimits } from '../../src/sandbox/limits/limits.js';

const log = pino({ level: 'silent' });
let tmp: string;
beforeAll(async () => {
  tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-no-cgroup-'));
});
afterAll(async () => {
  await fsp.rm(tmp, { recursive: true, force: true });
});

async function inSandbox(limits: SandboxLimits, command: string): Promise<string> {
  const runtime = await resolveSandbox(resolveSandboxOption({ mode: 'bwrap', limits }), { log, concurrency: 1 });
  if (runtime.kind !== 'bwrap') throw new Error('bubblewrap must work here');
  expect(runtime.limits).toBeUndefined();
  const workdir = await fsp.mkdtemp(path.join(tmp, 'work-'));
  const sandbox = new SessionSandbox(runtime, { workdir, allowedRoots: [], readOnlyRoots: [], maxFileBytes: undefined, hide: [] }, log);
  try {
    const bash = sandbox.tools().find((t) => t.name === 'bash')!;
    const out = await bash.run({ command } as never, undefined as never);
    return typeof out === 'string' ? out : JSON.stringify(out);
  } finally {
    await sandbox.close();
  }
}

describe('a sandbox without a cgroup', () => {
  it('runs at the niceness of its CPU weight, with its open files, OOM score and no core files', async () => {
    const out = await inSandbox(
      { cpuWeight: 50, openFiles: 512 },
      'echo "nice=$(nice)"; echo "files=$(ulimit -Hn)"; echo "oom=$(cat /proc/self/oom_score_adj)"; echo "core=$(ulimit -c)"',
    );
    expect(out).toMatch(/^nice=3$/m);
    expect(out).toMatch(/^files=512$/m);
    expect(out).toMatch(/^oom=1000$/m);
    expect(out).toMatch(/^core=0$/m);
  }, 30_000);

  it("a weight of 100 or more is no niceness, and no weight leaves the worker's own", async () => {
    expect(await inSandbox({ cpuWeight: 400 }, 'echo "nice=$(nice)"')).toMatch(/^nice=0$/m);
    expect(await inSandbox({ cpuWeight: null }, 'echo "nice=$(nice)"')).toMatch(new RegExp(`^nice=${os.getPriority()}$`, 'm'));
  }, 30_000);
});
