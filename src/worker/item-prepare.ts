import type Anthropic from '@anthropic-ai/sdk';
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';
import { setupSkills, type AgentToolContext } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import { coerceError, MemoryUnavailableError } from '../errors.js';
import { errorSummary } from '../internal/logger.js';
import type { Acquired } from './item-acquire.js';
import { ItemMemory, storeResources } from './item-memory.js';
import type { ItemReporter } from './item-reporter.js';
import type { ItemStep } from './item-step.js';
import type { MemoryPort } from './memory-port.js';
import type { MemorySpans } from './memory-spans.js';
import type { WorkerMetrics } from './metrics.js';
import type { ResolvedWorkerOptions } from './options.js';
import type { PathLocks } from './path-locks.js';
import type { ClaimedWork } from './poller.js';
import { ToolFolder, type SessionFolderCounts } from './tool-folder.js';

/** What an item holds, filled in as the phases take each piece; the teardown gives it all back. */
export interface ItemHoldings {
  folder?: ToolFolder;
  cleanupSkills: () => Promise<void>;
  memory?: ItemMemory;
  /** The session's tools started (its `sessionStarted` event went out). */
  sessionStarted: boolean;
}

/** A session ready to serve. */
export interface PreparedSession {
  kind: 'ready';
  sessionId: string;
  /** The context the file tools and skills work in, with the mounted stores' folders when memory is on. */
  toolContext: AgentToolContext;
  memory: ItemMemory | undefined;
}

export interface PrepareDeps {
  options: ResolvedWorkerOptions;
  pathLocks: PathLocks;
  memory: MemoryPort;
  metrics: WorkerMetrics;
  sessionFolders?: SessionFolderCounts | undefined;
}

/**
 * Prepare phase: fetch the session (one fetch shared by skills and memory), give its tools a
 * folder, set up its skills, and mount its memory stores. An item that is not a session, or whose
 * session already terminated, is skipped; one aborted before this phase never starts.
 * A session with stores but no sessions token fails while memory is on: running it without its
 * stores would silently lose the agent's memory. Skill failures are only logged, as the official
 * worker does.
 */
export async function prepare(
  work: ClaimedWork,
  item: { deps: PrepareDeps; acquired: Acquired; reporter: ItemReporter; spans: MemorySpans; step: ItemStep },
  held: ItemHoldings,
): Promise<PreparedSession | { kind: 'skipped' | 'aborted' }> {
  const { deps, acquired, reporter, step } = item;
  const { log } = reporter;
  const opts = deps.options;
  const signal = acquired.control.signal;
  const sessionId = reporter.sessionId;
  if (signal.aborted) return { kind: 'aborted' };
  if (work.data.type !== 'session' || sessionId === undefined) {
    log.info({ type: work.data.type }, 'not a session work item; stopping it without running anything');
    return { kind: 'skipped' };
  }
  const session = await fetchSession(acquired.client, sessionId, acquired.requestOptions, signal);
  if (session.status === 'terminated') {
    log.info('session already terminated; stopping its work item without running anything');
    return { kind: 'skipped' };
  }
  const stores = storeResources(session);
  const intervalMs = opts.memorySyncIntervalMs;
  if (stores.length > 0 && intervalMs !== null && acquired.sessionsToken === null) throw new MemoryUnavailableError(work.id, sessionId);

  held.folder = opts.concurrency > 1 ? ToolFolder.enter(deps.sessionFolders, opts.workdir, sessionId) : ToolFolder.shared(opts.workdir);
  await held.folder.create({ workId: work.id, sessionId });
  const toolContext: AgentToolContext = {
    workdir: held.folder.path,
    client: acquired.client,
    session,
    ...(opts.maxFileBytes !== undefined ? { maxFileBytes: opts.maxFileBytes } : {}),
  };
  try {
    held.cleanupSkills = await setupSkills(toolContext);
  } catch (e) {
    log.warn({ error: errorSummary(coerceError(e)) }, 'skill setup failed; the session runs without them');
  }

  if (stores.length > 0 && intervalMs !== null) {
    const memory = new ItemMemory({
      port: deps.memory,
      pathLocks: deps.pathLocks,
      metrics: deps.metrics,
      emit: reporter.emit,
      listens: reporter.listens,
      spans: item.spans,
      client: acquired.client,
      logger: log,
      settings: { ...opts, memorySyncIntervalMs: intervalMs },
      workId: work.id,
      session,
    });
    held.memory = memory;
    step.enter('waiting for its mount paths');
    await memory.lockPaths(signal);
    step.enter(`mounting the memory stores of session ${sessionId}`);
    await memory.mount(signal);
    toolContext.allowedRoots = memory.roots.all;
    toolContext.readOnlyRoots = memory.roots.readOnly;
  } else if (stores.length > 0) {
    // Not a debug line: the agent will find no folder where its instructions say a store is.
    const names = stores.map((r) => `${r.name ? `"${r.name}" ` : ''}(${r.memory_store_id}${r.mount_path ? ` at ${r.mount_path}` : ''})`);
    log.warn(
      {
        stores: names,
        fix: 'drop memorySyncIntervalMs: null (CLI: drop --memory-sync-interval off) to mount them, or detach the stores from the session',
      },
      `memory is off (memorySyncIntervalMs: null): session ${sessionId} runs without its ${stores.length} memory store(s) ${names.join(', ')}; the agent will not find their folders`,
    );
  }
  signal.throwIfAborted();
  return { kind: 'ready', sessionId, toolContext, memory: held.memory };
}

function fetchSession(
  client: Anthropic,
  sessionId: string,
  requestOptions: object,
  signal: AbortSignal,
): Promise<BetaManagedAgentsSession> {
  return client.beta.sessions.retrieve(sessionId, {}, { ...requestOptions, signal });
}
