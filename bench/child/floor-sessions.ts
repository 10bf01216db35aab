/**
 * The request floor of a queue of sessions: a bare SDK client serves up to `concurrency` work items
 * at once with only the requests any worker must make for each: poll and ack (environment key),
 * then with the item's sessions token: the session, one listing with content of each of its
 * stores, the event stream, the history, one tool result posted as soon as each tool use arrives
 * (no tool runs; any small text answers it), one basic listing of each store once the session
 * terminates, and the stop. No heartbeat (a session here ends well within the first lease), no
 * files, no retries.
 */
import Anthropic from '@anthropic-ai/sdk';
import type { ChildConfig, FloorConfig } from './protocol.js';

const POLL_BLOCK_MS = 999;

/** The sessions token inside a work item's secret (base64 or base64url JSON). */
function sessionsToken(secret: string | null | undefined): string {
  const token = secret
    ? (JSON.parse(Buffer.from(secret, 'base64').toString('utf8')) as { sessions_token?: unknown }).sessions_token
    : undefined;
  if (typeof token !== 'string' || token === '') throw new Error('bench floor: a work item came without a sessions token in its secret');
  return token;
}

async function pageAll(client: Anthropic, storeId: string, query: { view: 'full' | 'basic'; limit: number }): Promise<void> {
  for await (const _memory of client.beta.memoryStores.memories.list(storeId, query)) {
    // Only the requests count: the listing is read to its end and dropped.
  }
}

export async function serveSessions(
  config: ChildConfig,
  floor: Extract<FloorConfig, { kind: 'sessions' }>,
  signal: AbortSignal,
): Promise<void> {
  const envClient = new Anthropic({ apiKey: null, authToken: config.environmentKey, baseURL: config.baseURL, logLevel: 'off' });

  async function serveItem(work: Anthropic.Beta.Environments.BetaSelfHostedWork): Promise<void> {
    const client = envClient.withOptions({ authToken: sessionsToken(work.secret) });
    const sessionId = work.data.id;
    const session = await client.beta.sessions.retrieve(sessionId);
    const storeIds = session.resources.flatMap((r) => (r.type === 'memory_store' ? [r.memory_store_id] : []));
    await Promise.all(storeIds.map((id) => pageAll(client, id, { view: 'full', limit: 20 })));

    const answered = new Set<string>();
    const posts: Promise<unknown>[] = [];
    const answer = (event: { type: string; id?: string }): void => {
      if (event.type !== 'agent.tool_use' || event.id === undefined || answered.has(event.id)) return;
      answered.add(event.id);
      posts.push(
        client.beta.sessions.events.send(sessionId, {
          events: [{ type: 'user.tool_result', tool_use_id: event.id, is_error: false, content: [{ type: 'text', text: 'ok' }] }],
        }),
      );
    };
    const stream = await client.beta.sessions.events.stream(sessionId);
    for await (const event of client.beta.sessions.events.list(sessionId, { limit: 1000 })) answer(event);
    for await (const event of stream) {
      if (event.type === 'session.status_terminated' || event.type === 'session.deleted') break;
      answer(event);
    }
    await Promise.all(posts);
    await Promise.all(storeIds.map((id) => pageAll(client, id, { view: 'basic', limit: 100 })));
    await client.beta.environments.work.stop(work.id, { environment_id: work.environment_id, force: true });
  }

  async function lane(): Promise<void> {
    while (!signal.aborted) {
      let work: Anthropic.Beta.Environments.BetaSelfHostedWork | null;
      try {
        work = await envClient.beta.environments.work.poll(config.environmentId, { block_ms: POLL_BLOCK_MS }, { signal });
      } catch (e) {
        if (signal.aborted) return;
        throw e;
      }
      if (work == null) continue;
      await envClient.beta.environments.work.ack(work.id, { environment_id: work.environment_id });
      await serveItem(work);
    }
  }

  await Promise.all(Array.from({ length: floor.concurrency }, () => lane()));
}
