// Pins what a sync report counts as a change worth an info line.
import { describe, expect, it } from 'vitest';
import { changedSomething, emptyReport } from '../../../src/memory/rules/sync-report.js';

describe('changedSomething', () => {
  const rows: Array<{ description: string; field: keyof ReturnType<typeof emptyReport> | undefined; expected: boolean }> = [
    { description: 'an idle sync changed nothing', field: undefined, expected: false },
    { description: 'an upload is a change', field: 'uploads', expected: true },
    { description: 'a refusal is worth reporting', field: 'refusals', expected: true },
    { description: 'an error alone is no change (it is warned about apart)', field: 'errors', expected: false },
    { description: 'a skipped store alone is no change', field: 'skippedStores', expected: false },
  ];
  it.each(rows)('$description', ({ field, expected }) => {
    const r = emptyReport();
    if (field) r[field] = 1;
    expect(changedSomething(r)).toBe(expected);
  });
});
