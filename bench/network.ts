/**
 * The sandbox network's benchmark scenarios: what the egress proxy costs a session's start (ours
 * with network 'unrestricted' vs network 'host', the behaviour before the proxy, wall and CPU with
 * the tool hosts included), and the rate of a 100 MiB download through the proxy against the same
 * download made directly (a test host in a network namespace the scenario makes; both paths cross
 * the same veth pair, so the difference is the proxy's).
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import type { SandboxNetworkOption } from '../src/sandbox/network/network-option.js';
import { resolveSandboxOption } from '../src/sandbox/options.js';
import { resolveSandbox } from '../src/sandbox/resolve.js';
import { SessionSandbox } from '../src/sandbox/session-sandbox.js';
import type { Emulator, ScriptStep } from '../src/testing/index.js';
import { startTestHost } from '../test/sandbox/network/test-netns.js';
import { endOf, requestsOf, ROUTES, type JobContext } from './job.js';
import type { Metrics } from './scenarios.js';

const SESSION_TIMEOUT_MS = 180_000;

/** Which network goes first: alternates from one repetition to the next. */
let startTurn = 0;

/** 16 (4 quick) sessions of 2 bash calls each, served at once, under each network in turn. */
export async function sandboxStartWithProxy(ctx: JobContext): Promise<Metrics> {
  const sessions = ctx.quick ? 4 : 16;
  const networks = startTurn++ % 2 === 0 ? (['host', 'unrestricted'] as const) : (['unrestricted', 'host'] as const);
  const out: Metrics = {};
  for (const network of networks) {
    const ids: string[] = [];
    const workIds: string[] = [];
    const step: ScriptStep<Emulator> = { tool: 'bash', input: { command: 'echo ok' } };
    for (let i = 0; i < sessions; i++) {
      const s = await ctx.emu.createSession({ script: [step, step] });
      ids.push(s.sessionId);
      workIds.push(s.workId);
    }
    const child = await ctx.startChild({ concurrency: sessions, sandbox: { mode: 'bwrap', network } });
    const done = await Promise.all(ids.map((id) => ctx.emu.waitForSession(id, { timeoutMs: SESSION_TIMEOUT_MS }))).then(
      () => undefined,
      (e: unknown) => e,
    );
    const end = await child.stop();
    if (done !== undefined) throw done;
    const acks = workIds.flatMap((w) => requestsOf(ctx.emu, ROUTES.ack, w)).sort((a, b) => a.startedAt - b.startedAt);
    const stops = workIds.flatMap((w) => requestsOf(ctx.emu, ROUTES.stop, w));
    if (stops.length < sessions || acks[0] === undefined)
      throw new Error(`bench sandbox start (${network}): ${stops.length} of ${sessions} stopped`);
    const wallMs = Math.max(...stops.map(endOf)) - acks[0].startedAt;
    const cpuMs = end.cpuMs - child.readyUsage.cpuMs;
    if (network === 'host') Object.assign(out, { wallHostMs: wallMs, cpuHostMs: cpuMs });
    else Object.assign(out, { wallProxyMs: wallMs, cpuProxyMs: cpuMs });
  }
  return out;
}

/**
 * Seconds per 100 MiB of `curl` fetching `bytes` from the test host inside a sandbox, direct
 * (network 'host') and through the proxy, and the CPU seconds per 100 MiB the proxy path costs
 * outside curl: the worker's process (the proxy) plus the sandbox's tool host (the relay).
 * `rate`: the test host's link shaped to it (tc's notation); unshaped, the veth moves bytes as
 * fast as the kernel copies them, which is the proxy's own ceiling rather than a link's.
 */
async function download(ctx: JobContext, rate: string | undefined): Promise<Metrics> {
  const bytes = (ctx.quick ? 8 : 100) * 1024 * 1024;
  const host = await startTestHost(rate === undefined ? {} : { rate });
  const log = pino({ level: 'silent' });
  const out: Metrics = {};
  try {
    const url = `http://${host.address}:8080/bytes?n=${bytes}`;
    const networks: SandboxNetworkOption[] = ['host', { type: 'unrestricted', allowPrivate: ['198.18.0.0/15'] }];
    for (const network of networks) {
      const work = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-bench-net-'));
      const runtime = await resolveSandbox(resolveSandboxOption({ mode: 'bwrap', network }), { log, concurrency: 1 });
      if (runtime.kind !== 'bwrap') throw new Error('bench proxy download: the sandbox did not start');
      const sandbox = new SessionSandbox(
        runtime,
        { workdir: work, allowedRoots: [], readOnlyRoots: [], maxFileBytes: undefined, hide: [] },
        log,
      );
      try {
        const bash = sandbox.tools().find((t) => t.name === 'bash')!;
        // Warm: the host started, the connection path exercised once.
        await bash.run({ command: `curl -sS -o /dev/null http://${host.address}:8080/hello` }, undefined);
        // The tool host is the shell's parent: its user and system ticks (fields 14 and 15) before and after.
        const ticks = `awk '{print $14+$15}' /proc/$PPID/stat`;
        const before = process.cpuUsage();
        const answer = await bash.run(
          {
            command: `a=$(${ticks}); curl -sS -o /dev/null -w '%{size_download} %{time_total}' '${url}'; echo " $a $(${ticks}) $(getconf CLK_TCK)"`,
          },
          undefined,
        );
        const used = process.cpuUsage(before);
        const [size, seconds, t0, t1, hz] = String(answer).trim().split(/\s+/).map(Number);
        if (size !== bytes)
          throw new Error(`bench proxy download (${typeof network === 'string' ? network : 'proxy'}): got ${String(answer)}`);
        const scale = (100 * 1024 * 1024) / bytes;
        const cpuSeconds = ((used.user + used.system) / 1e6 + (t1! - t0!) / hz!) * scale;
        if (network === 'host') Object.assign(out, { directSecPer100MiB: seconds! * scale, directCpuSecPer100MiB: cpuSeconds });
        else Object.assign(out, { proxySecPer100MiB: seconds! * scale, proxyCpuSecPer100MiB: cpuSeconds });
      } finally {
        await sandbox.close();
        await fsp.rm(work, { recursive: true, force: true });
      }
    }
  } finally {
    await host.close();
  }
  return out;
}

/** The download over the bare veth: the proxy path's ceiling on this machine. */
export function proxyDownload(ctx: JobContext): Promise<Metrics> {
  return download(ctx, undefined);
}

/** The download with the test host's link shaped to 1 Gbit/s, a fast real link. */
export function proxyDownloadGigabit(ctx: JobContext): Promise<Metrics> {
  return download(ctx, '1gbit');
}
