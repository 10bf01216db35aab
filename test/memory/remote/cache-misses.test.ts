// The warm mount's choice per top-level part between fetching its uncached memories one by one and
// listing the part again in the full view.
import { describe, expect, it } from 'vitest';
import { missPlan, partOf } from '../../../src/memory/remote/cache-misses.js';

describe('partOf', () => {
  it.each([
    ['/top.md', '/'],
    ['/notes/a.md', '/notes/'],
    ['/notes/deep/b.md', '/notes/'],
  ])('%s is in part %s', (p, part) => {
    expect(partOf(p)).toBe(part);
  });
});

describe('missPlan', () => {
  it.each([
    // [misses, part size, plan]: retrieve while misses are at most twice the part's full pages.
    [1, 1, 'retrieve'],
    [2, 1, 'retrieve'],
    [3, 1, 'list'],
    [20, 200, 'retrieve'],
    [21, 200, 'list'],
    [200, 2000, 'retrieve'],
    [201, 2000, 'list'],
    [30, 60, 'list'],
  ] as const)('%i misses of %i memories: %s', (misses, size, plan) => {
    expect(missPlan(misses, size)).toBe(plan);
  });
});
