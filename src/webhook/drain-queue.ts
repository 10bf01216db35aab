import type Anthropic from '@anthropic-ai/sdk';
import type { BetaSelfHostedWork } from '@anthropic-ai/sdk/resources/beta/environments/work';

/** One work item claimed from the queue (polled and acknowledged), with what `handleItem` needs. */
export interface ClaimedItem {
  workId: string;
  environmentId: string;
  /** `data.id` of a `session` item; undefined for other item types (health checks). */
  sessionId: string | undefined;
  dataType: string | undefined;
  /** The item's secret as the poll returned it; forward it untouched, never log it. */
  secret: string | undefined;
}

/**
 * Poll the environment's queue once (waiting at most `blockMs`, capped by the API at 999) and
 * acknowledge what comes back. `undefined` means the queue was empty. The client must authenticate
 * with the environment key.
 */
export async function claimOne(
  envClient: Anthropic,
  environmentId: string,
  opts: { workerId: string; blockMs?: number; signal?: AbortSignal },
): Promise<ClaimedItem | undefined> {
  const item: BetaSelfHostedWork | null = await envClient.beta.environments.work.poll(
    environmentId,
    { block_ms: Math.min(opts.blockMs ?? 999, 999), 'Anthropic-Worker-ID': opts.workerId },
    { signal: opts.signal },
  );
  if (!item) return undefined;
  await envClient.beta.environments.work.ack(item.id, { environment_id: item.environment_id }, { signal: opts.signal });
  return {
    workId: item.id,
    environmentId: item.environment_id,
    sessionId: item.data.type === 'session' ? item.data.id : undefined,
    dataType: item.data.type ?? undefined,
    secret: item.secret ?? undefined,
  };
}
