/**
 * Bytes a mount may hold at once in one kind of buffer (listing pages in flight, or files waiting to
 * be written), shared by every store of the mount.
 *
 * Rules:
 * - {@link take} grants `n` bytes once they fit under the bound, or at once when nothing is held
 *   (a single grant larger than the bound still goes, alone); grants are served first come, first
 *   served, so a large one is not starved by small ones;
 * - {@link give} returns bytes and serves the waiters that now fit;
 * - a waiter whose signal aborts is rejected with the signal's reason and takes nothing;
 * - {@link resize} changes a grant once its real size is known (a page's body read): the bound
 *   may be passed then, and later grants wait until it is met again.
 */
export class ByteBudget {
  readonly bound: number;
  #used = 0;
  #peak = 0;
  #waiters: Array<{ n: number; resolve: () => void }> = [];

  constructor(bound: number) {
    this.bound = Math.max(1, Math.floor(bound));
  }

  /** Bytes granted and not given back. */
  get used(): number {
    return this.#used;
  }

  /** Highest {@link used} so far (instrumentation). */
  get peak(): number {
    return this.#peak;
  }

  /** Grant `n` bytes now if they fit and nobody waits; false otherwise. */
  tryTake(n: number): boolean {
    if (this.#waiters.length > 0 || !this.#fits(n)) return false;
    this.#add(n);
    return true;
  }

  /** Grant `n` bytes once they fit. */
  take(n: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.tryTake(n)) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        n,
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        const i = this.#waiters.indexOf(waiter);
        if (i >= 0) this.#waiters.splice(i, 1);
        reject(signal?.reason);
        // The waiter at the head may have been the one holding the others back.
        this.#serve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  /** Give back `n` bytes. */
  give(n: number): void {
    this.#used = Math.max(0, this.#used - n);
    this.#serve();
  }

  /** A grant of `from` bytes is really `to` bytes. */
  resize(from: number, to: number): void {
    if (to >= from) this.#add(to - from);
    else this.give(from - to);
  }

  #fits(n: number): boolean {
    return this.#used === 0 || this.#used + n <= this.bound;
  }

  #add(n: number): void {
    this.#used += n;
    if (this.#used > this.#peak) this.#peak = this.#used;
  }

  #serve(): void {
    while (this.#waiters.length > 0 && this.#fits(this.#waiters[0]!.n)) {
      const w = this.#waiters.shift()!;
      this.#add(w.n);
      w.resolve();
    }
  }
}
