import type { SessionToolRunner } from '@anthropic-ai/sdk/lib/tools/SessionToolRunner';

/**
 * The worker-side members of the SDK's session runner that the SDK's own worker sets, in the shape
 * the installed SDK reads them. Neither is public, and they changed between releases:
 * - up to 1.15, the method `_setSendRetryWindow(ms)`: how long a failing result post is retried;
 * - from 1.16, the field `_worker`: `sendRetryWindowMs()` (how long a stopping runner retries a
 *   failing post), `leaseLost` (once it aborts, no post goes out), `onIdle()` (the session went
 *   idle with no call running) and `onCallStopped()` (awaited before a stopped call is answered).
 * A test (test/worker/sdk-private-members.test.ts) fails on any installed SDK that reads neither.
 */
interface RunnerWorkerMembers {
  _setSendRetryWindow?: (ms: number) => void;
  _worker?: {
    sendRetryWindowMs: () => number;
    leaseLost: AbortSignal;
    onIdle: () => void;
    onCallStopped: () => Promise<void>;
  };
}

/** What one runner is told besides its public options. */
export interface RunnerLink {
  /**
   * Aborts when this runner may post nothing more: the lease is lost, or the runner is stopped
   * before any call of it ran (a call it holds never ran, and must not be answered).
   */
  abandon: AbortSignal;
  /** The session went idle with no call running (SDK 1.16 and later). Default: nothing. */
  onIdle?: () => void;
  /** Awaited before the runner answers a call that was stopped (SDK 1.16 and later). Default: nothing. */
  onCallStopped?: () => Promise<void>;
}

/**
 * Links the runners of one work item to its lease, as the official worker does: a result post is
 * retried only as long as the lease TTL the last heartbeat reported (so only while the lease can
 * still be ours), and nothing is posted once the runner's {@link RunnerLink.abandon} signal aborts.
 *
 * What each SDK does without these links, and why they are set on every version: up to 1.15, a
 * runner retries a failing post for five minutes from its first attempt and posts nothing once it
 * is stopped; from 1.16 it retries a failing post for as long as it is not stopping, then for five
 * minutes from the first attempt (bounded by 30 s after it is stopped), and answers every call it
 * held when stopped with "tool 'X' was stopped, and may have already done some or all of its work"
 * unless its posts are abandoned. The work item aborts `abandon` for a runner stopped before the
 * mount finished, so a call it held is left unanswered for the next runner (or the next worker),
 * never answered without having run.
 */
export class RunnerHooks {
  readonly #ttlMs: () => number;
  readonly #runners = new Set<RunnerWorkerMembers>();

  /** `ttlMs` reads the lease TTL in force (the server's once a heartbeat reported one). */
  constructor(ttlMs: () => number) {
    this.#ttlMs = ttlMs;
  }

  /** A heartbeat reported a new TTL: runners that take the window by a call get it now. */
  ttlChanged(ttlMs: number): void {
    for (const r of this.#runners) r._setSendRetryWindow?.(ttlMs);
  }

  /** Link `runner` for as long as it runs; the returned function unlinks it. */
  attach(runner: SessionToolRunner, link: RunnerLink): () => void {
    const r = runner as unknown as RunnerWorkerMembers;
    r._worker = {
      sendRetryWindowMs: () => this.#ttlMs(),
      leaseLost: link.abandon,
      onIdle: link.onIdle ?? (() => {}),
      onCallStopped: link.onCallStopped ?? (async () => {}),
    };
    if (typeof r._setSendRetryWindow === 'function') {
      r._setSendRetryWindow(this.#ttlMs());
      this.#runners.add(r);
    }
    return () => {
      this.#runners.delete(r);
    };
  }
}
