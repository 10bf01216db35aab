import type { BetaRunnableTool, BetaToolRunContext } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { ToolError } from '@anthropic-ai/sdk/lib/tools/ToolError';
import { betaAgentToolset20260401 } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import type { Logger } from '../internal/logger.js';
import { bwrapArgs, type SandboxView } from './bwrap-args.js';
import { hideKinds } from './host-layout.js';
import type { EgressRefusal } from './network/egress-proxy.js';
import { egressPolicyFor } from './network/network-option.js';
import { EGRESS_LISTENER_PORT, egressEnvironment, SessionEgress } from './network/session-egress.js';
import type { SandboxLimitHit } from './limits/limits.js';
import { describeEnforcement, SessionLimits } from './limits/session-limits.js';
import { readFallbackFacts } from './limits/without-cgroup.js';
import { LIMIT_SETUP_EXIT, processesHardLimit } from './launcher.js';
import type { SandboxRuntime } from './runtime.js';
import { toolsetShellPerThread } from './sdk-bounds.js';
import { sandboxEnvironment } from './tool-env.js';
import { ToolHostProcess, type CallThread } from './tool-host-process.js';

/**
 * Node's options for the tool host, before its entry file. `--max-semi-space-size=1`: a young
 * generation of at most two 1 MiB halves. Node's default lets a call with a large output (a long
 * listing, a big file) grow it to several MiB, up to 32, which the host then keeps while it waits
 * for the next call; the host's own allocations are small, and its calls' time goes to their
 * processes. `--expose-gc`: the idle host collects what such a call left (see `tool-host.ts`).
 */
export const TOOL_HOST_NODE_OPTIONS: readonly string[] = ['--max-semi-space-size=1', '--expose-gc'];

/** What one session's sandbox is built around: its folders, as the tools' context names them. */
export interface SessionSandboxSpec {
  workdir: string;
  /** Every store folder of the session. */
  allowedRoots: readonly string[];
  /** The folders of its read-only stores (bound read-only). */
  readOnlyRoots: readonly string[];
  maxFileBytes: number | null | undefined;
  /**
   * The store folders as host folders bound at the paths the agent sees (each session's own copy
   * of a store, at the store's mount path). When set, it replaces `allowedRoots`/`readOnlyRoots`
   * (each bound at its own path), and the tools get the in-sandbox paths as their roots.
   */
  stores?: ReadonlyArray<{ hostPath: string; path: string; readOnly: boolean }> | undefined;
  /** Paths never visible inside (the state folder, credential files), beside the option's own. */
  hide: readonly string[];
  /** The hosts of the session agent's MCP servers (a `limited` network may allow them). Default: none. */
  mcpServerHosts?: readonly string[];
  /** Told of each connection the egress proxy refused. Default: a warning in the log. */
  onEgressRefused?: (refusal: EgressRefusal) => void;
  /** Names the session's cgroup (with the worker's pid). Default: the workdir's name. */
  sessionId?: string;
  /** Told each limit a call reached, after the call. */
  onLimitHit?: (hit: SandboxLimitHit) => void;
}

/**
 * The agent toolset of one session, run in a bubblewrap sandbox of its own. The worker hands the
 * SDK runner {@link tools}: the toolset's own definitions (names, descriptions, input schemas,
 * built from the SDK and never run here) whose `run` sends the call to the session's tool host.
 * Calls run concurrently, each with the session thread the runner names, so the toolset keeps its
 * shell per thread in the sandbox too. A call past the tool timeout loses only the processes it
 * started. The host starts with the session and again after any failure, so a host that died, did
 * not stop a call or wrote garbage costs that call an error result and the next call gets a
 * fresh one. {@link close} ends the sandbox and everything the agent started in it.
 */
export class SessionSandbox {
  readonly #runtime: Extract<SandboxRuntime, { kind: 'bwrap' }>;
  readonly #spec: SessionSandboxSpec;
  readonly #log: Logger;
  #host: ToolHostProcess | undefined;
  /** The session's egress proxy (networks `unrestricted` and `limited`), shared by its successive hosts. */
  #egress: SessionEgress | undefined;
  #limits: SessionLimits | undefined;
  #closed = false;
  #hostsStarted = 0;

  constructor(runtime: Extract<SandboxRuntime, { kind: 'bwrap' }>, spec: SessionSandboxSpec, log: Logger) {
    this.#runtime = runtime;
    this.#spec = spec;
    this.#log = log;
  }

  /** Start the first host now, so the first tool call does not wait for it. */
  warmUp(): void {
    this.#hostOrStart();
  }

  /** Start the host (when none runs) and resolve once it is ready (`undefined`), or with why it never will be. */
  started(): Promise<string | undefined> {
    return this.#hostOrStart().ready();
  }

  /** @internal Hosts started for this session so far (1 + one per failure that was followed by a call); tests read it. */
  get hostsStarted(): number {
    return this.#hostsStarted;
  }

  /** @internal The host-side pid of the current sandbox's init, when one runs; tests read it. */
  get sandboxPid(): number | undefined {
    return this.#host?.alive ? this.#host.sandboxPid : undefined;
  }

  /** The proxies of the agent toolset, for the runner. */
  tools(): BetaRunnableTool[] {
    const definitions = betaAgentToolset20260401({ workdir: this.#spec.workdir });
    return definitions.map((definition) => {
      const { close: _close, run: _run, ...described } = definition;
      const run = (input: unknown, context?: BetaToolRunContext): Promise<string | ToolResultBlocks> =>
        this.#run(definition.name, input, context);
      return { ...described, run } as BetaRunnableTool;
    });
  }

  /** End the sandbox (and every process in it); later calls fail. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const host = this.#host;
    this.#host = undefined;
    await host?.close();
    await this.#egress?.close();
    await this.#limits?.close();
  }

  async #run(tool: string, input: unknown, context: BetaToolRunContext | undefined): Promise<string | ToolResultBlocks> {
    if (this.#closed) throw new ToolError(`${tool}: the session's sandbox is closed`);
    const host = this.#hostOrStart();
    const result = await host.call(tool, input, {
      timeoutMs: this.#runtime.options.toolTimeoutMs,
      signal: context?.signal,
      thread: threadOf(context),
    });
    const note = await this.#enforceLimitHits(host);
    if (result.kind === 'failed') {
      throw new ToolError(`${tool}: the sandbox could not run this call (${result.message}); the next call starts a new sandbox${note}`);
    }
    if (result.kind === 'timedOut') {
      const said = typeof result.content === 'string' ? result.content : JSON.stringify(result.content);
      throw new ToolError(
        `${tool}: the call was still running after ${result.timeoutMs} ms, so the processes it started were killed. ` +
          `What it had printed:\n${said}${note}`,
      );
    }
    const content =
      note === '' ? (result.content as ToolResultBlocks | string) : withNote(result.content as ToolResultBlocks | string, note);
    if (result.isError) throw new ToolError(content);
    return content;
  }

  /**
   * The limits the sandbox reached during a call, told to the worker and said to the agent. After
   * a memory or process limit the sandbox is restarted for the next call: what was left running in
   * it (a fork bomb, a process stuck at the limit) ends with it.
   */
  async #enforceLimitHits(host: ToolHostProcess): Promise<string> {
    const hits = this.#limits?.check(host.alive ? host.sandboxPid : undefined) ?? [];
    if (hits.length === 0) return '';
    for (const hit of hits) this.#spec.onLimitHit?.(hit);
    const restart = hits.some((h) => h.limit !== 'tmp');
    if (restart && this.#host === host) {
      this.#host = undefined;
      await host.close();
      this.#limits?.rebase();
    }
    const sentences = hits.map((h) => h.message);
    if (restart) sentences.push('the sandbox was restarted for the next call; processes left running in it ended');
    return `\n\n[${sentences.join('; ')}]`;
  }

  /** The running host, or a new one: its sandbox started, its cgroup and egress proxy made on the first. */
  #hostOrStart(): ToolHostProcess {
    if (this.#host?.alive) return this.#host;
    this.#hostsStarted++;
    const { layout, options } = this.#runtime;
    const spec = this.#spec;
    const policy = egressPolicyFor(options.network, spec.mcpServerHosts ?? []);
    if (policy !== undefined) {
      this.#egress ??= new SessionEgress(policy, {
        onRefused:
          spec.onEgressRefused ??
          ((r) => this.#log.warn({ host: r.host, port: r.port, rule: r.rule, address: r.address }, 'sandbox network connection refused')),
      });
    }
    const egress = this.#egress;
    const stores = spec.stores ?? spec.allowedRoots.map((p) => ({ hostPath: p, path: p, readOnly: spec.readOnlyRoots.includes(p) }));
    // The session's cgroup is made with its first sandbox and kept across restarts.
    this.#limits ??= new SessionLimits(
      this.#runtime.limits ??
        describeEnforcement(options.limits, { kind: 'none', problem: 'no cgroup was set up', fix: '' }, readFallbackFacts()),
      spec.sessionId ?? spec.workdir.split('/').pop() ?? 'session',
      this.#log,
    );
    const view: SandboxView = {
      system: layout.system,
      readOnly: [...layout.readOnly, ...options.readOnlyPaths],
      workdir: spec.workdir,
      stores,
      readWrite: options.readWritePaths,
      hide: hideKinds([...spec.hide, ...options.hidePaths]),
      network: options.network.type === 'host' ? 'host' : 'none',
      userNamespace: this.#runtime.userNamespace,
      disableNestedUserNamespaces: this.#runtime.disableUserns,
      env: { ...sandboxEnvironment(process.env, options.env, spec.workdir), ...(egress ? egressEnvironment() : {}) },
      command: withProcessLimit([layout.node, ...TOOL_HOST_NODE_OPTIONS, layout.hostEntry], this.#limits.processesInside),
      tmpBytes: this.#limits.tmpBytes,
    };
    this.#host = new ToolHostProcess({
      launch: { bwrap: this.#runtime.bwrap, args: bwrapArgs(view), seccomp: this.#runtime.seccomp, bounds: this.#limits.bounds() },
      init: {
        t: 'init',
        workdir: spec.workdir,
        allowedRoots: stores.map((s) => s.path),
        readOnlyRoots: stores.filter((s) => s.readOnly).map((s) => s.path),
        maxFileBytes: spec.maxFileBytes,
        shellPerThread: toolsetShellPerThread(),
        ...(egress ? { egress: { port: EGRESS_LISTENER_PORT } } : {}),
      },
      log: this.#log,
      // The host hands its loopback listener to the proxy, which then accepts the sandbox's connections itself.
      egress,
    });
    // The start runs at the worker's CPU weight until the host is ready (its calls wait for that) or failed.
    void this.#host.ready().then(this.#limits.sandboxStarting());
    return this.#host;
  }
}

/**
 * The session thread of a call, from the run context the SDK runner passes (a private member,
 * present from SDK 1.16; `test/sandbox/sdk-bounds.test.ts` fails where the installed SDK's runner
 * and toolset disagree with `sdk-bounds.ts` about it). Anything malformed is no thread.
 */
function threadOf(context: BetaToolRunContext | undefined): CallThread | undefined {
  const thread = (context as { _sessionThread?: unknown } | undefined)?._sessionThread as Partial<CallThread> | undefined;
  if (typeof thread?.key !== 'string' || !(thread.signal instanceof AbortSignal)) return undefined;
  return { key: thread.key, signal: thread.signal };
}

/**
 * The sandbox's first command under `RLIMIT_NPROC` (soft and hard) set inside its user namespace,
 * where the kernel counts the processes of that namespace alone; never above the worker's own hard
 * limit (the sandbox could not set it). `undefined`: the command as it is.
 */
export function withProcessLimit(command: readonly string[], processes: number | undefined): string[] {
  if (processes === undefined) return [...command];
  const hard = processesHardLimit();
  const n = hard === undefined ? processes : Math.min(processes, hard);
  return [
    '/bin/bash',
    '--norc',
    '-c',
    `ulimit -u "$1" || exit ${LIMIT_SETUP_EXIT}; shift; exec "$@"`,
    'maw-processes',
    String(n),
    ...command,
  ];
}

function withNote(content: ToolResultBlocks | string, note: string): ToolResultBlocks | string {
  if (typeof content === 'string') return content + note;
  return [...content, { type: 'text', text: note.trimStart() }] as ToolResultBlocks;
}

type ToolResultBlocks = Exclude<Awaited<ReturnType<BetaRunnableTool['run']>>, string>;
