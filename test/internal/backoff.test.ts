// Pins the backoff schedule: doubling from the base, capped, jitter only ever shortens the wait.
import { describe, expect, it } from 'vitest';
import { backoffDelayMs } from '../../src/internal/backoff.js';

const policy = { baseMs: 1000, maxMs: 60_000, jitter: 0.25 };

describe('backoffDelayMs', () => {
  const rows = [
    { description: 'first retry waits the base', attempt: 0, random: 0, expected: 1000 },
    { description: 'third retry waits four times the base', attempt: 2, random: 0, expected: 4000 },
    { description: 'the cap holds for late attempts', attempt: 20, random: 0, expected: 60_000 },
    { description: 'full jitter takes a quarter off', attempt: 1, random: 1, expected: 1500 },
    { description: 'negative attempts count as the first', attempt: -3, random: 0, expected: 1000 },
  ];
  for (const row of rows) {
    it(row.description, () => {
      expect(backoffDelayMs(row.attempt, policy, () => row.random)).toBe(row.expected);
    });
  }
});
