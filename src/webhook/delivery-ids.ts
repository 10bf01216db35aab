/**
 * The webhook ids a handler has answered, for dropping redeliveries. An id counts as done only once
 * a drain that started after its delivery reached the end of the queue; while that drain runs the
 * id is pending, and a drain that gives up forgets its ids, so a redelivery drains again instead of
 * being answered "duplicate" while its item stays queued. The newest `window` done ids are kept.
 */
export class DeliveryIds {
  readonly #window: number;
  readonly #done = new Set<string>();
  #pending = new Set<string>();

  constructor(window: number) {
    this.#window = window;
  }

  /** True when a drain for this id already reached the end of the queue. */
  isDone(id: string): boolean {
    return this.#done.has(id);
  }

  /** Record a delivery that will trigger a drain. */
  accept(id: string): void {
    this.#pending.add(id);
  }

  /** The ids a drain pass now starting settles (those accepted since the last pass started). */
  takePending(): string[] {
    const ids = [...this.#pending];
    this.#pending = new Set();
    return ids;
  }

  /** Settle a pass's ids: remembered when it drained the queue, forgotten when it gave up. */
  settle(ids: readonly string[], drained: boolean): void {
    if (!drained) return;
    for (const id of ids) {
      this.#done.delete(id);
      this.#done.add(id);
      if (this.#done.size > this.#window) this.#done.delete(this.#done.values().next().value as string);
    }
  }
}
