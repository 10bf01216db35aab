import type { BetaRunnableTool, BetaToolRunContext } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { ToolError } from '@anthropic-ai/sdk/lib/tools/ToolError';
import { betaAgentToolset20260401 } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import type { Logger } from '../internal/logger.js';
import { bwrapArgs, type SandboxView } from './bwrap-args.js';
import { hideKinds } from './host-layout.js';
import type { SandboxLimitHit } from './limits/limits.js';
import { describeEnforcement, SessionLimits } from './limits/session-limits.js';
import type { SandboxRuntime } from './runtime.js';
import { sandboxEnvironment } from './tool-env.js';
import { ToolHostProcess } from './tool-host-process.js';

/** What one session's sandbox is built around: its folders, as the tools' context names them. */
export interface SessionSandboxSpec {
  workdir: string;
  /** Every store folder of the session. */
  allowedRoots: readonly string[];
  /** The folders of its read-only stores (bound read-only). */
  readOnlyRoots: readonly string[];
  maxFileBytes: number | null | undefined;
  /** Paths never visible inside (the state folder, credential files), beside the option's own. */
  hide: readonly string[];
  /** Names the session's cgroup (with the worker's pid). Default: the workdir's name. */
  sessionId?: string;
  /** Told each limit a call reached, after the call. */
  onLimitHit?: (hit: SandboxLimitHit) => void;
}

/**
 * The agent toolset of one session, run in a bubblewrap sandbox of its own. The worker hands the
 * SDK runner {@link tools}: the toolset's own definitions (names, descriptions, input schemas,
 * built from the SDK and never run here) whose `run` sends the call to the session's tool host.
 * The host starts with the session and again after any failure, so a host that died, hung past the
 * tool timeout or wrote garbage costs that one call an error result and the next call gets a
 * fresh one. {@link close} ends the sandbox and everything the agent started in it.
 */
export class SessionSandbox {
  readonly #runtime: Extract<SandboxRuntime, { kind: 'bwrap' }>;
  readonly #spec: SessionSandboxSpec;
  readonly #log: Logger;
  #host: ToolHostProcess | undefined;
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
    this.#current();
  }

  /** Hosts started for this session so far (1 + one per failure that was followed by a call). */
  get hostsStarted(): number {
    return this.#hostsStarted;
  }

  /** The host-side pid of the current sandbox's init, when one runs. */
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
    await this.#limits?.close();
  }

  async #run(tool: string, input: unknown, context: BetaToolRunContext | undefined): Promise<string | ToolResultBlocks> {
    if (this.#closed) throw new ToolError(`${tool}: the session's sandbox is closed`);
    const host = this.#current();
    const result = await host.call(tool, input, { timeoutMs: this.#runtime.options.toolTimeoutMs, signal: context?.signal });
    const note = await this.#limitNote(host);
    if (result.kind === 'failed') {
      throw new ToolError(`${tool}: the sandbox could not run this call (${result.message}); the next call starts a new sandbox${note}`);
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
  async #limitNote(host: ToolHostProcess): Promise<string> {
    const hits = this.#limits?.check(host.alive ? host.sandboxPid : undefined) ?? [];
    if (hits.length === 0) return '';
    for (const hit of hits) this.#spec.onLimitHit?.(hit);
    const restart = hits.some((h) => h.limit !== 'tmp');
    if (restart && this.#host === host) {
      this.#host = undefined;
      await host.close();
    }
    const sentences = hits.map((h) => h.message);
    if (restart) sentences.push('the sandbox was restarted for the next call; processes left running in it ended');
    return `\n\n[${sentences.join('; ')}]`;
  }

  #current(): ToolHostProcess {
    if (this.#host?.alive) return this.#host;
    this.#hostsStarted++;
    const { layout, options } = this.#runtime;
    const spec = this.#spec;
    // The session's cgroup is made with its first sandbox and kept across restarts.
    this.#limits ??= new SessionLimits(
      this.#runtime.limits ?? describeEnforcement(options.limits, { kind: 'none', problem: 'no cgroup was set up', fix: '' }),
      spec.sessionId ?? spec.workdir.split('/').pop() ?? 'session',
      this.#log,
    );
    const view: SandboxView = {
      system: layout.system,
      readOnly: [...layout.readOnly, ...options.readOnlyPaths],
      workdir: spec.workdir,
      stores: spec.allowedRoots.map((p) => ({ path: p, readOnly: spec.readOnlyRoots.includes(p) })),
      readWrite: options.readWritePaths,
      hide: hideKinds([...spec.hide, ...options.hidePaths]),
      network: options.network,
      userNamespace: this.#runtime.userNamespace,
      env: sandboxEnvironment(process.env, options.env, spec.workdir),
      command: [layout.node, layout.hostEntry],
      tmpBytes: this.#limits.tmpBytes,
    };
    this.#host = new ToolHostProcess({
      bwrap: this.#runtime.bwrap,
      args: bwrapArgs(view),
      init: {
        t: 'init',
        workdir: spec.workdir,
        allowedRoots: [...spec.allowedRoots],
        readOnlyRoots: [...spec.readOnlyRoots],
        maxFileBytes: spec.maxFileBytes,
      },
      log: this.#log,
      prelude: this.#limits.prelude(),
    });
    return this.#host;
  }
}

function withNote(content: ToolResultBlocks | string, note: string): ToolResultBlocks | string {
  if (typeof content === 'string') return content + note;
  return [...content, { type: 'text', text: note.trimStart() }] as ToolResultBlocks;
}

type ToolResultBlocks = Exclude<Awaited<ReturnType<BetaRunnableTool['run']>>, string>;
