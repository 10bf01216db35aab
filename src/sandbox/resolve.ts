import { SandboxUnavailableError } from '../errors.js';
import type { Logger } from '../internal/logger.js';
import { HOST_NETWORK_WARNING } from './network/network-option.js';
import { prepareSandboxLimits } from './limits/session-limits.js';
import type { ResolvedSandboxOptions } from './options.js';
import { probeSandbox } from './probe.js';
import type { SandboxRuntime } from './runtime.js';

/**
 * How many sessions the process serves, which decides what `'auto'` does without a sandbox:
 * - `'sessions'`: sessions from a queue, one after another or side by side (`run()`, the webhook
 *   handler, `handleItem()` on a worker of `concurrency` above 1). On Linux it refuses to start:
 *   tenants would share one process tree, `/tmp`, workdir, network and the worker's credentials,
 *   and one session's background processes would outlive it into the next.
 * - `'one-session'`: this process serves one session and ends (`handleItem()` with `concurrency`
 *   1: the CLI's `handle`, the launcher's Job per session). The container or VM around the process
 *   is then the boundary between sessions; it runs without a sandbox after a warning.
 *
 * Off Linux (macOS, a development host) there is no bubblewrap: `'auto'` runs without a sandbox
 * after a warning, louder when sessions share the process.
 */
export type SandboxServing = 'sessions' | 'one-session';

/**
 * Decide what the worker runs its tools in. `'none'` is taken as chosen. `'auto'` takes the sandbox
 * when the probe starts one; otherwise it returns `none` with the refusal that
 * {@link sandboxForServing} throws where sessions share the process. `'bwrap'` throws
 * {@link SandboxUnavailableError} when no sandbox can start.
 */
export async function resolveSandbox(
  options: ResolvedSandboxOptions,
  ctx: { log: Logger; concurrency: number; platform?: string; stateDir?: string },
): Promise<SandboxRuntime> {
  if (options.mode === 'none') return { kind: 'none', chosen: true };
  const probe = await probeSandbox({
    bwrapPath: options.bwrapPath,
    network: options.network.type === 'host' ? 'host' : 'own',
    ...(ctx.platform !== undefined ? { platform: ctx.platform } : {}),
  });
  if (probe.ok) {
    ctx.log.info({ bwrap: probe.bwrap, network: options.network.type }, 'each session runs its tools in a bubblewrap sandbox');
    if (options.network.type === 'host') ctx.log.warn(HOST_NETWORK_WARNING);
    if (probe.seccomp === undefined) {
      ctx.log.warn(
        { arch: process.arch },
        `sandboxes run without a seccomp filter: none is built for ${process.arch} (x64 and arm64 only); io_uring, keyctl, ptrace and the mount API stay open to the agent`,
      );
    }
    if (!probe.disableUserns) {
      ctx.log.warn(
        { bwrap: probe.bwrap },
        `${probe.bwrap} has no --disable-userns (bubblewrap before 0.8): only the seccomp filter keeps the agent from nested user namespaces; upgrade bubblewrap`,
      );
    }
    const limits =
      ctx.stateDir !== undefined ? await prepareSandboxLimits(options.limits, { stateDir: ctx.stateDir, log: ctx.log }) : undefined;
    const { userNamespace, disableUserns, seccomp } = probe;
    return {
      kind: 'bwrap',
      bwrap: probe.bwrap,
      layout: probe.layout,
      options,
      userNamespace,
      disableUserns,
      seccomp,
      ...(limits ? { limits } : {}),
    };
  }
  if (options.mode === 'bwrap') {
    throw new SandboxUnavailableError(probe.reason, `sandbox: 'bwrap' cannot start a sandbox: ${probe.problem}. Fix: ${probe.fix}`);
  }
  const platform = ctx.platform ?? process.platform;
  if (platform === 'linux') {
    const refusal = new SandboxUnavailableError(
      probe.reason,
      `no sandbox starts on this host, and sandbox 'auto' does not serve sessions without one: ${probe.problem}. Fix: ${probe.fix}. ` +
        "To run sessions' tools in the worker process anyway, set sandbox: 'none' (CLI: --sandbox none)",
    );
    return { kind: 'none', chosen: false, problem: probe.problem, refusal };
  }
  const message = `sessions' tools run in the worker process without a sandbox: ${probe.problem}. Fix: ${probe.fix}; or set sandbox: 'none' to choose this`;
  if (ctx.concurrency > 1) {
    ctx.log.error(
      { concurrency: ctx.concurrency, reason: probe.reason },
      `${message}. With concurrency ${ctx.concurrency} every session's agent can read and change the other sessions' folders and read this process's credentials`,
    );
  } else {
    ctx.log.warn({ reason: probe.reason }, message);
  }
  return { kind: 'none', chosen: false, problem: probe.problem };
}

/**
 * The runtime a worker may serve with, for how many sessions it serves: throws the refusal of an
 * `'auto'` that found no sandbox on Linux where sessions share the process; where one session
 * runs, warns (once per runtime) and serves without.
 */
export function sandboxForServing(runtime: SandboxRuntime, serving: SandboxServing, log: Logger): SandboxRuntime {
  if (runtime.kind !== 'none' || runtime.refusal === undefined) return runtime;
  if (serving === 'sessions') throw runtime.refusal;
  if (!warned.has(runtime)) {
    warned.add(runtime);
    log.warn(
      { reason: runtime.refusal.reason },
      `this process serves one session, and its tools run in the worker process without a sandbox: ${runtime.problem ?? ''}. ` +
        "The container or VM around this process is the only boundary; set sandbox: 'none' to choose this without a warning, " +
        `or make the sandbox start: ${runtime.refusal.message.replace(/^.*Fix: /, '')}`,
    );
  }
  return runtime;
}

const warned = new WeakSet<SandboxRuntime>();
