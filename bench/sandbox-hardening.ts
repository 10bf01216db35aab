/**
 * What the sandbox's kernel hardening (a user namespace for every worker, `--disable-userns`, the
 * seccomp filter) costs a sandbox's start: N sandboxes started one after the other with the
 * hardening and N without it (as a root worker started them before: no user namespace, no
 * filter), interleaved, each running one trivial bash call before it is closed. Prints the mean
 * wall time and CPU per sandbox (of this process and everything it starts, bubblewrap, its init,
 * the tool host, bash: counted by a control group of its own, see cpu-group.ts), and the ratios.
 *
 *   npx tsx bench/sandbox-hardening.ts [N]     (needs a build: the tool host runs from dist/)
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { resolveSandboxOption } from '../src/sandbox/options.js';
import { resolveSandbox } from '../src/sandbox/resolve.js';
import type { SandboxRuntime } from '../src/sandbox/runtime.js';
import { SessionSandbox } from '../src/sandbox/session-sandbox.js';
import { createCpuGroup } from './cpu-group.js';

type BwrapRuntime = Extract<SandboxRuntime, { kind: 'bwrap' }>;

const n = Number(process.argv[2] ?? 20);
const log = pino({ level: 'silent' });
const group = createCpuGroup(process.pid);
if (!group) throw new Error('no writable cpu control group on this host: the CPU of the sandboxes cannot be counted');
const cpuMs = (): number => group.cpuMs();

async function startOne(runtime: BwrapRuntime, workdir: string): Promise<void> {
  const sandbox = new SessionSandbox(runtime, { workdir, allowedRoots: [], readOnlyRoots: [], maxFileBytes: undefined, hide: [] }, log);
  try {
    const bash = sandbox.tools().find((t) => t.name === 'bash')!;
    await bash.run({ command: 'true' }, undefined);
  } finally {
    await sandbox.close();
  }
}

const resolved = await resolveSandbox(resolveSandboxOption({ mode: 'bwrap' }), { log, concurrency: 1 });
if (resolved.kind !== 'bwrap') throw new Error('no sandbox starts here');
const hardened: BwrapRuntime = resolved;
const before: BwrapRuntime = { ...resolved, userNamespace: process.getuid?.() !== 0, disableUserns: false, seccomp: undefined };
const variants = { before, hardened } as const;
const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-bench-hardening-'));
const totals = { before: { wallMs: 0, cpuMs: 0 }, hardened: { wallMs: 0, cpuMs: 0 } };
try {
  // One warm-up each (page cache, the tool host's first load).
  for (const name of ['before', 'hardened'] as const) await startOne(variants[name], tmp);
  for (let i = 0; i < n; i++) {
    const order = i % 2 === 0 ? (['before', 'hardened'] as const) : (['hardened', 'before'] as const);
    for (const name of order) {
      const cpu0 = cpuMs();
      const t0 = performance.now();
      await startOne(variants[name], tmp);
      totals[name].wallMs += performance.now() - t0;
      totals[name].cpuMs += cpuMs() - cpu0;
    }
  }
} finally {
  await fsp.rm(tmp, { recursive: true, force: true });
}
group.remove();
const per = (name: 'before' | 'hardened', k: 'wallMs' | 'cpuMs'): number => totals[name][k] / n;
console.log(`sandbox start + one bash call + close, N=${n} each, interleaved (uid ${process.getuid?.()}, ${process.arch})`);
console.log(
  `  before   (no user namespace for root, no filter): wall ${per('before', 'wallMs').toFixed(1)} ms, CPU ${per('before', 'cpuMs').toFixed(1)} ms`,
);
console.log(
  `  hardened (user namespace, --disable-userns, seccomp): wall ${per('hardened', 'wallMs').toFixed(1)} ms, CPU ${per('hardened', 'cpuMs').toFixed(1)} ms`,
);
console.log(
  `  ratio    wall ${(per('hardened', 'wallMs') / per('before', 'wallMs')).toFixed(3)}x, CPU ${(per('hardened', 'cpuMs') / per('before', 'cpuMs')).toFixed(3)}x`,
);
