import type Anthropic from '@anthropic-ai/sdk';
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { SessionToolRunner } from '@anthropic-ai/sdk/lib/tools/SessionToolRunner';
import { betaAgentToolset20260401 } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import type { Clock } from '../internal/clock.js';
import { defaultStateDir } from '../memory/index.js';
import type { SandboxRuntime } from '../sandbox/runtime.js';
import { SessionSandbox } from '../sandbox/session-sandbox.js';
import type { ItemHoldings, PreparedSession } from './item-prepare.js';
import type { ItemReporter } from './item-reporter.js';
import type { ItemStep } from './item-step.js';
import type { ResolvedWorkerOptions } from './options.js';
import type { SendRetryWindow } from './send-retry-window.js';
import { type ToolCallRecord, ToolGuard } from './tool-guard.js';

export interface ServeContext {
  options: ResolvedWorkerOptions;
  /** The tool runner's client: the item's, with its posts over the buffered transport when it may. */
  client: Anthropic;
  signal: AbortSignal;
  retryWindow: SendRetryWindow;
  /** Tool outcomes of earlier runs of a session in this worker (a redelivered item answers from it). */
  toolRecord?: ToolCallRecord | undefined;
  reporter: ItemReporter;
  step: ItemStep;
  clock: Clock;
  /** Monotonic ms when the item was claimed: the start of `readyMs`. */
  claimedAt: number;
  /** What the session's tools run in. Default: the worker process. */
  sandbox?: SandboxRuntime | undefined;
  /** Test hook: wraps each session's tools before the replay guard. */
  wrapTools?: ((tools: BetaRunnableTool[]) => BetaRunnableTool[]) | undefined;
}

/**
 * Serve phase: run the session's tool calls until the session ends or the item's signal aborts.
 * The tools (the caller's, or the agent toolset on the prepared context) run behind a guard that
 * brackets each call with the memory sync loop and answers a replayed call from the record.
 */
export async function serve(ctx: ServeContext, prepared: PreparedSession, held: ItemHoldings): Promise<void> {
  const { options: opts, reporter } = ctx;
  const { log } = reporter;
  const { sessionId, toolContext, memory } = prepared;
  const sandbox =
    opts.tools === undefined && ctx.sandbox?.kind === 'bwrap'
      ? new SessionSandbox(
          ctx.sandbox,
          {
            workdir: toolContext.workdir,
            allowedRoots: toolContext.allowedRoots ?? [],
            readOnlyRoots: toolContext.readOnlyRoots ?? [],
            maxFileBytes: toolContext.maxFileBytes,
            hide: [opts.stateDir ?? defaultStateDir()],
          },
          log,
        )
      : undefined;
  try {
    sandbox?.warmUp();
    const tools: BetaRunnableTool[] =
      sandbox?.tools() ??
      (typeof opts.tools === 'function' ? opts.tools(toolContext) : (opts.tools ?? betaAgentToolset20260401(toolContext)));
    await runTools(ctx, prepared, held, ctx.wrapTools ? ctx.wrapTools(tools) : tools);
  } finally {
    // Every process the agent started in the sandbox ends here, before the final sync reads its folders.
    await sandbox?.close();
  }
}

async function runTools(ctx: ServeContext, prepared: PreparedSession, held: ItemHoldings, tools: BetaRunnableTool[]): Promise<void> {
  const { options: opts, reporter } = ctx;
  const { log } = reporter;
  const { sessionId, memory } = prepared;
  const guard = new ToolGuard({
    hooks: memory?.toolHooks,
    logger: log,
    ...(ctx.toolRecord ? { outcomes: ctx.toolRecord.forSession(sessionId) } : {}),
  });
  const runner = new SessionToolRunner(sessionId, {
    client: ctx.client,
    tools: guard.wrapAll(tools),
    ...(opts.maxIdleMs !== undefined ? { maxIdleMs: opts.maxIdleMs } : {}),
    ...(opts.requestOptions !== undefined ? { requestOptions: opts.requestOptions } : {}),
    signal: ctx.signal,
  });
  ctx.retryWindow.attach(runner);

  held.sessionStarted = true;
  ctx.step.enter(`running the tool calls of session ${sessionId}`);
  const stores = memory?.storeCount ?? 0;
  const readyMs = ctx.clock.now() - ctx.claimedAt;
  log.info({ stores, ready_ms: readyMs }, 'session started');
  reporter.emit('sessionStarted', { workId: reporter.workId, sessionId, stores, readyMs });
  for await (const call of runner) {
    if (call.posted) guard.posted(call.toolUseId);
    log.debug({ tool: call.name, tool_use_id: call.toolUseId, is_error: call.isError, posted: call.posted }, 'tool call done');
  }
  if (guard.replays > 0) log.info({ replays: guard.replays }, 'replayed tool calls answered from the record');
}
