import type { LimitFunction } from 'p-limit';
import type { ByteBudget } from './byte-budget.js';

/**
 * Content a mount keeps in listed pages at once, all stores together: pages of large memories are
 * paged fewer at a time, so what waits to be written stays about this size whatever the memories
 * weigh (and is collected young instead of piling up in the old generation).
 */
export const PAGE_CONTENT_BYTES_IN_FLIGHT = 1024 * 1024;

/** Fewest listing parts a mount pages at once, however large its memories. */
export const MIN_PAGES_IN_FLIGHT = 2;

/**
 * How many listing parts may run at once: as many pages as fit {@link PAGE_CONTENT_BYTES_IN_FLIGHT}
 * at the mean memory size seen so far (`itemsPerPage` memories a page), within
 * [{@link MIN_PAGES_IN_FLIGHT}, `concurrency`]. Before any memory is seen, `concurrency`.
 */
export function pagesInFlight(p: { concurrency: number; itemsPerPage: number; items: number; contentBytes: number }): number {
  if (p.items === 0) return p.concurrency;
  const pageBytes = (p.contentBytes / p.items) * p.itemsPerPage;
  const fit = pageBytes > 0 ? Math.floor(PAGE_CONTENT_BYTES_IN_FLIGHT / pageBytes) : p.concurrency;
  return Math.max(Math.min(MIN_PAGES_IN_FLIGHT, p.concurrency), Math.min(p.concurrency, fit));
}

/**
 * Narrows `limit` (shared by the listings of every store of a mount) as memories arrive: call
 * {@link PageBudget.saw} with each memory's content length.
 */
export class PageBudget {
  readonly #limit: LimitFunction;
  readonly #concurrency: number;
  readonly #itemsPerPage: number;
  #items = 0;
  #contentBytes = 0;

  constructor(limit: LimitFunction, itemsPerPage: number) {
    this.#limit = limit;
    this.#concurrency = limit.concurrency;
    this.#itemsPerPage = itemsPerPage;
  }

  saw(contentLength: number): void {
    this.#items++;
    this.#contentBytes += contentLength;
    const next = pagesInFlight({
      concurrency: this.#concurrency,
      itemsPerPage: this.#itemsPerPage,
      items: this.#items,
      contentBytes: this.#contentBytes,
    });
    if (next !== this.#limit.concurrency) this.#limit.concurrency = next;
  }
}

/**
 * What a listing page is guessed to weigh before any page was read: 20 memories of 8 KiB. Only the
 * first pages of a mount are asked for on this guess; every later one on what pages really weighed.
 */
const FIRST_PAGE_GUESS_BYTES = 20 * 8 * 1024;

/**
 * Bounds, in bytes, the listing pages a mount has in flight (asked for, read, and not yet handed
 * on in full), all stores together. A page is granted its guessed weight (pages read so far, per
 * item, times the page size) before its request is sent, holds its real body length once read, and
 * gives it back once every item in it was handed on.
 */
export class PageGate {
  readonly budget: ByteBudget;
  #items = 0;
  #bytes = 0;

  constructor(budget: ByteBudget) {
    this.budget = budget;
  }

  /** The guessed weight of a page of `limit` items. */
  guess(limit: number): number {
    if (this.#items === 0) return this.#bytes > 0 ? this.#bytes : FIRST_PAGE_GUESS_BYTES;
    return Math.ceil((this.#bytes / this.#items) * limit);
  }

  /** A page of `items` items weighed `bytes`. */
  observe(bytes: number, items: number): void {
    this.#bytes += bytes;
    this.#items += items;
  }
}
