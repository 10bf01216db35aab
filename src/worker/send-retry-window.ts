import type { SessionToolRunner } from '@anthropic-ai/sdk/lib/tools/SessionToolRunner';

/**
 * The tool-result send retry window of a session's runner: the lease TTL each heartbeat reports
 * (as the official worker sets it), so a post is retried only as long as the lease can still be
 * ours. The lease starts before the runner exists, so the latest TTL is held until it attaches.
 */
export class SendRetryWindow {
  #ttlMs: number | undefined;
  #runner: SessionToolRunner | undefined;

  /** The lease reported a TTL. */
  set(ttlMs: number): void {
    this.#ttlMs = ttlMs;
    if (this.#runner) applyWindow(this.#runner, ttlMs);
  }

  /** The runner exists: give it the latest TTL now and every later one. */
  attach(runner: SessionToolRunner): void {
    this.#runner = runner;
    if (this.#ttlMs !== undefined) applyWindow(runner, this.#ttlMs);
  }
}

/** Set the runner's send retry window (an SDK-internal method the official worker calls too). */
function applyWindow(runner: SessionToolRunner, ms: number): void {
  const r = runner as unknown as { _setSendRetryWindow?: (ms: number) => void };
  if (typeof r._setSendRetryWindow === 'function') r._setSendRetryWindow(ms);
}
