/**
 * Pins how many listing parts a mount pages at once: all of `concurrency` until a memory is seen,
 * then as many pages as fit the content budget at the mean memory size seen, never fewer than the
 * minimum nor more than `concurrency`; the shared limiter follows as memories arrive.
 */
import pLimit from 'p-limit';
import { describe, expect, it } from 'vitest';
import { MIN_PAGES_IN_FLIGHT, PAGE_CONTENT_BYTES_IN_FLIGHT, PageBudget, pagesInFlight } from '../../../src/memory/remote/page-budget.js';

describe('pagesInFlight', () => {
  const rows = [
    { description: 'before any memory is seen, every part may run', concurrency: 16, items: 0, contentBytes: 0, expected: 16 },
    {
      description: 'pages of 1 KiB memories all fit: capped by concurrency',
      concurrency: 16,
      items: 100,
      contentBytes: 100 * 1024,
      expected: 16,
    },
    {
      description: 'pages of 8 KiB memories: as many as fit the budget',
      concurrency: 16,
      items: 100,
      contentBytes: 100 * 8192,
      expected: Math.floor(PAGE_CONTENT_BYTES_IN_FLIGHT / (20 * 8192)),
    },
    {
      description: 'pages of 100 KiB memories: the minimum',
      concurrency: 16,
      items: 10,
      contentBytes: 10 * 102_400,
      expected: MIN_PAGES_IN_FLIGHT,
    },
    { description: 'empty memories: capped by concurrency', concurrency: 16, items: 50, contentBytes: 0, expected: 16 },
    { description: 'a concurrency below the minimum is kept', concurrency: 1, items: 10, contentBytes: 10 * 102_400, expected: 1 },
  ];
  for (const row of rows) {
    it(row.description, () => {
      expect(pagesInFlight({ concurrency: row.concurrency, itemsPerPage: 20, items: row.items, contentBytes: row.contentBytes })).toBe(
        row.expected,
      );
    });
  }
});

describe('PageBudget', () => {
  it('narrows the shared limiter as large memories arrive, and widens it again for small ones', () => {
    const limit = pLimit(16);
    const budget = new PageBudget(limit, 20);
    for (let i = 0; i < 20; i++) budget.saw(8192);
    expect(limit.concurrency).toBe(6);
    for (let i = 0; i < 2000; i++) budget.saw(100);
    expect(limit.concurrency).toBe(16);
  });
});
