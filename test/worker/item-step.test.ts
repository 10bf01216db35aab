// Pins the error a work item reports for what its phases threw: an API failure becomes a
// RemoteApiError naming the item and the step it failed in (status and request id kept); our own
// errors pass through unchanged; anything else becomes an Error.
import { describe, expect, it } from 'vitest';
import { LeaseLostError } from '../../src/errors.js';
import { ItemStep } from '../../src/worker/work-item.js';

/** A 404 shaped as the SDK's API errors are. */
const notFound = Object.assign(new Error('404 not_found_error: no such session'), {
  name: 'NotFoundError',
  status: 404,
  headers: {},
  error: { type: 'error', error: { type: 'not_found_error', message: 'no such session' } },
  requestID: 'req_9',
});
const ours = new LeaseLostError('work_1');

const rows: Array<{ description: string; thrown: unknown; check: (e: Error) => void }> = [
  {
    description: 'an API failure names the item and the step, keeping status and request id',
    thrown: notFound,
    check: (e) => {
      expect(e).toMatchObject({ code: 'MAW_REMOTE_API', status: 404, requestId: 'req_9', cause: notFound });
      expect(e.message).toContain('work item work_1: mounting the memory stores of session sesn_1 failed with HTTP 404');
    },
  },
  { description: 'a WorkerError passes through unchanged', thrown: ours, check: (e) => expect(e).toBe(ours) },
  { description: 'a thrown string becomes an Error carrying it', thrown: 'boom', check: (e) => expect(e.message).toContain('boom') },
];

describe('ItemStep.failure', () => {
  it.each(rows)('$description', ({ thrown, check }) => {
    const step = new ItemStep('work_1', 'retrieving session sesn_1');
    step.enter('mounting the memory stores of session sesn_1');
    check(step.failure(thrown));
  });
});
