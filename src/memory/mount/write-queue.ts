import type { ByteBudget } from '../remote/byte-budget.js';

/**
 * Writes what a listing delivers behind it, one item at a time, so the listing asks for its next
 * page while the last one is written.
 *
 * Rules:
 * - items are written in the order pushed, by one runner started on the next turn of the event
 *   loop (after the listing has sent its next request), which yields to the event loop every
 *   `batch` items: synchronous writes never hold it for long;
 * - {@link push} returns a promise once `highWater` items wait: the listing awaits it, so the
 *   contents held in memory stay bounded however fast pages arrive;
 * - the first write that throws stops the queue: what waits is dropped, and that error rejects the
 *   pending and later {@link push} promises and {@link drained};
 * - {@link stop} drops what waits (a failed listing); {@link settled} waits for the write in flight;
 * - an item that enters while a run ends (its bytes given back by that run's last write) starts
 *   a new run, so {@link drained} never resolves with an item unwritten;
 * - `batch` hooks, when given, bracket each run of writes between two yields: `begin` before its
 *   first write, `end` after its last (a throwing `end` fails the queue as a write does);
 * - with `bytes`, an item enters the queue only once its size is granted by that budget (shared by
 *   the queues of one mount), and gives it back once written (or dropped): the bytes waiting to be
 *   written never pass the budget's bound, whatever the items weigh. {@link push} then returns a
 *   promise until the item is in.
 */

export interface WriteBatchHooks {
  begin(): void;
  /** `failed`: the batch ends on a write that threw. */
  end(failed: boolean): Promise<void> | void;
}

/** Writes one item: synchronously (returns nothing), or by the promise it returns. */
export type WriteItem<T> = (item: T) => Promise<void> | void;
/** The budget a queue's items are counted in, and what one item weighs. */
export interface WriteQueueBytes<T> {
  budget: ByteBudget;
  sizeOf(item: T): number;
}

interface Queued<T> {
  item: T;
  bytes: number;
}

export class WriteQueue<T> {
  readonly #write: WriteItem<T>;
  readonly #highWater: number;
  readonly #batch: number;
  readonly #hooks: WriteBatchHooks | undefined;
  readonly #bytes: WriteQueueBytes<T> | undefined;
  /** Aborted by {@link stop}: pushes still waiting for bytes give up. */
  readonly #halt = new AbortController();
  #items: Array<Queued<T> | undefined> = [];
  #head = 0;
  #running: Promise<void> | undefined;
  #error: { reason: unknown } | undefined;
  #waiters: Array<{ resolve: () => void; reject: (e: unknown) => void }> = [];

  constructor(write: WriteItem<T>, opts: { highWater: number; batch: number; hooks?: WriteBatchHooks; bytes?: WriteQueueBytes<T> }) {
    this.#write = write;
    this.#highWater = Math.max(1, opts.highWater);
    this.#batch = Math.max(1, opts.batch);
    this.#hooks = opts.hooks;
    this.#bytes = opts.bytes;
  }

  get #queued(): number {
    return this.#items.length - this.#head;
  }

  /** Queue `item`; returns a promise to await when the queue is full (or already failed). */
  push(item: T): Promise<void> | undefined {
    if (this.#error !== undefined) return Promise.reject(this.#error.reason);
    if (this.#bytes === undefined) return this.#enqueue(item, 0);
    const { budget } = this.#bytes;
    const n = this.#bytes.sizeOf(item);
    if (budget.tryTake(n)) return this.#enqueue(item, n);
    return budget.take(n, this.#halt.signal).then(
      () => {
        if (this.#error !== undefined || this.#halt.signal.aborted) {
          budget.give(n);
          throw this.#error !== undefined ? this.#error.reason : this.#halt.signal.reason;
        }
        return this.#enqueue(item, n);
      },
      (e: unknown) => {
        throw this.#error !== undefined ? this.#error.reason : e;
      },
    );
  }

  #enqueue(item: T, bytes: number): Promise<void> | undefined {
    this.#items.push({ item, bytes });
    this.#running ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.#run());
    if (this.#queued < this.#highWater) return undefined;
    return new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /** Resolves once everything pushed is written; rejects with the first write failure. */
  async drained(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
    if (this.#error !== undefined) throw this.#error.reason;
  }

  /** Drop every item not written yet (and every push still waiting for bytes). */
  stop(): void {
    let freed = 0;
    for (let i = this.#head; i < this.#items.length; i++) freed += this.#items[i]?.bytes ?? 0;
    this.#items = [];
    this.#head = 0;
    if (freed > 0) this.#bytes?.budget.give(freed);
    if (!this.#halt.signal.aborted) this.#halt.abort(new Error('the write queue stopped'));
  }

  /** Resolves once no write is in flight (never rejects). */
  async settled(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  async #run(): Promise<void> {
    let inBatch = false;
    try {
      let sinceYield = 0;
      while (this.#queued > 0) {
        if (!inBatch) {
          this.#hooks?.begin();
          inBatch = true;
        }
        const { item, bytes } = this.#items[this.#head]!;
        this.#items[this.#head++] = undefined;
        if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
          this.#items = this.#items.slice(this.#head);
          this.#head = 0;
        }
        try {
          // A synchronous write costs no promise and no turn of the microtask queue.
          const pending = this.#write(item);
          if (pending !== undefined) await pending;
        } finally {
          if (bytes > 0) this.#bytes?.budget.give(bytes);
        }
        if (this.#waiters.length > 0 && this.#queued < this.#highWater) this.#wake();
        if (++sinceYield >= this.#batch) {
          sinceYield = 0;
          inBatch = false;
          await this.#hooks?.end(false);
          await new Promise<void>((resolve) => setImmediate(resolve));
        }
      }
      if (inBatch) {
        inBatch = false;
        await this.#hooks?.end(false);
      }
    } catch (e) {
      this.#error = { reason: e };
      this.stop();
      if (inBatch) await Promise.resolve(this.#hooks?.end(true)).catch(() => undefined);
    } finally {
      this.#running = undefined;
      // An item let in while this run was ending (its bytes granted by the run's last write) gets
      // a run of its own: nothing pushed is left unwritten while drained() resolves.
      if (this.#error === undefined && this.#queued > 0)
        this.#running = new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.#run());
      this.#wake();
    }
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) {
      if (this.#error !== undefined) w.reject(this.#error.reason);
      else w.resolve();
    }
  }
}
