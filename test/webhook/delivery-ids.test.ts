// Pins which webhook ids count as already handled: an id is done only once a drain pass that
// started after its delivery reached the end of the queue; a pass that gave up forgets its ids (a
// redelivery drains again); ids accepted during a pass belong to the next one; the newest
// `window` done ids are kept.
import { describe, expect, it } from 'vitest';
import { DeliveryIds } from '../../src/webhook/delivery-ids.js';

type Step = { accept: string } | { pass: boolean } | { take: true };

const rows: Array<{ description: string; window?: number; steps: Step[]; done: string[]; notDone: string[] }> = [
  { description: 'an accepted id is not done before its drain ends', steps: [{ accept: 'a' }], done: [], notDone: ['a'] },
  { description: 'a drained pass makes its ids done', steps: [{ accept: 'a' }, { pass: true }], done: ['a'], notDone: [] },
  { description: 'a pass that gave up forgets its ids', steps: [{ accept: 'a' }, { pass: false }], done: [], notDone: ['a'] },
  {
    description: 'a redelivery after a pass that gave up is settled by the next pass',
    steps: [{ accept: 'a' }, { pass: false }, { accept: 'a' }, { pass: true }],
    done: ['a'],
    notDone: [],
  },
  {
    description: 'an id accepted while a pass runs is settled by the next pass, not the running one',
    steps: [{ accept: 'a' }, { take: true }, { accept: 'b' }, { pass: true }],
    done: ['a'],
    notDone: ['b'],
  },
  {
    description: 'the window keeps the newest done ids',
    window: 2,
    steps: [{ accept: 'a' }, { accept: 'b' }, { accept: 'c' }, { pass: true }],
    done: ['b', 'c'],
    notDone: ['a'],
  },
];

describe('DeliveryIds', () => {
  for (const row of rows) {
    it(row.description, () => {
      const ids = new DeliveryIds(row.window ?? 10);
      let taken: string[] | undefined;
      for (const step of row.steps) {
        if ('accept' in step) ids.accept(step.accept);
        else if ('take' in step) taken = ids.takePending();
        else {
          // A pass settles what it took when it started (or takes now, if no start was recorded).
          ids.settle(taken ?? ids.takePending(), step.pass);
          taken = undefined;
        }
      }
      for (const id of row.done) expect(ids.isDone(id), id).toBe(true);
      for (const id of row.notDone) expect(ids.isDone(id), id).toBe(false);
    });
  }
});
