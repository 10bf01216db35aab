import { isApiError, toRemoteApiError } from '../api/classify.js';
import { coerceError, WorkerError } from '../errors.js';

/** What a work item is doing, so a failure of the API says which step failed. */
export class ItemStep {
  readonly #workId: string;
  #current: string;

  constructor(workId: string, first: string) {
    this.#workId = workId;
    this.#current = first;
  }

  get current(): string {
    return this.#current;
  }

  enter(step: string): void {
    this.#current = step;
  }

  /**
   * The error an item reports for `e`: an API failure becomes a RemoteApiError naming the item and
   * the step (status, request id and retryable kept); our own errors stay as they are.
   */
  failure(e: unknown): Error {
    return isApiError(e) && !(e instanceof WorkerError)
      ? toRemoteApiError(e, `work item ${this.#workId}: ${this.#current}`)
      : coerceError(e);
  }
}
