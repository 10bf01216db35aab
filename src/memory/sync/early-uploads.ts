import pLimit from 'p-limit';
import type { ActionDone } from './executor.js';
import { emptyReport } from '../rules/sync-report.js';
import { earlyUpload, type EarlyUploadIndex } from '../rules/early-upload-rule.js';
import type { LocalEntry, RemoteEntry, SyncAction } from '../rules/plan.js';
import type { ActionOutcome } from '../rules/sync-state.js';
import type { SyncReport } from '../rules/types.js';

type PushCreate = Extract<SyncAction, { kind: 'push-create' }>;

/** What the uploads started during the scan did, for the pass to fold into its state and plan. */
export interface EarlyUploadResult {
  /** Each attempted upload and its outcome, for `applyOutcomes`. */
  steps: Array<[SyncAction, ActionOutcome]>;
  /** Memories created, by path: the listing taken before them does not show them. */
  created: Map<string, RemoteEntry>;
  /** Paths whose upload this pass already attempted: the plan does not run them again. */
  attempted: Set<string>;
  /** Uploads attempted but not done. */
  notSaved: string[];
  report: SyncReport;
}

/**
 * Uploads the final sync starts while its scan still runs: each file the scan reports goes through the
 * early-upload rule as soon as the listing is in (files found before that wait for it), and a
 * qualifying one is uploaded at once, at most `concurrency` at a time. The plan made after the
 * scan covers everything else; `settle` hands it what these did.
 */
export class EarlyUploads {
  readonly #run: (action: PushCreate, bytes: Buffer | undefined) => Promise<ActionDone>;
  readonly #limit: ReturnType<typeof pLimit>;
  readonly #waiting: Array<[string, LocalEntry, Buffer | undefined]> = [];
  readonly #jobs: Promise<void>[] = [];
  readonly #result: EarlyUploadResult = { steps: [], created: new Map(), attempted: new Set(), notSaved: [], report: emptyReport() };
  #index: EarlyUploadIndex | undefined;
  #closed = false;

  constructor(run: (action: PushCreate, bytes: Buffer | undefined, report: SyncReport) => Promise<ActionDone>, concurrency: number) {
    this.#run = (action, bytes) => run(action, bytes, this.#result.report);
    this.#limit = pLimit(Math.max(1, concurrency));
  }

  /** A file the scan found (its bytes when the scan kept them). */
  offer(rel: string, entry: LocalEntry, bytes: Buffer | undefined): void {
    if (this.#closed) return;
    if (this.#index === undefined) this.#waiting.push([rel, entry, bytes]);
    else this.#consider(this.#index, rel, entry, bytes);
  }

  /** The listing is in (and the marker re-checked): from now on qualifying files go at once. */
  open(index: EarlyUploadIndex): void {
    if (this.#closed || this.#index !== undefined) return;
    this.#index = index;
    for (const [rel, entry, bytes] of this.#waiting.splice(0)) this.#consider(index, rel, entry, bytes);
  }

  /** The scan is over: start nothing more, and wait for the uploads started. */
  async settle(): Promise<EarlyUploadResult> {
    this.#closed = true;
    this.#waiting.length = 0;
    await Promise.all(this.#jobs);
    this.#result.notSaved.sort();
    return this.#result;
  }

  #consider(index: EarlyUploadIndex, rel: string, entry: LocalEntry, bytes: Buffer | undefined): void {
    const action = earlyUpload(index, rel, entry);
    if (action === undefined) return;
    const result = this.#result;
    result.attempted.add(rel);
    this.#jobs.push(
      this.#limit(async () => {
        const done = await this.#run(action, bytes);
        if (done.outcome !== undefined) {
          result.steps.push([action, done.outcome]);
          if (done.outcome.ok && done.outcome.id !== undefined)
            result.created.set(rel, { id: done.outcome.id, sha: done.outcome.sha ?? action.sha });
        }
        if (done.notSaved) result.notSaved.push(rel);
      }),
    );
  }
}
