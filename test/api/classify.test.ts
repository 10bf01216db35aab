// Pins how API failures are classified: which statuses are worth retrying and which are final.
import { describe, expect, it } from 'vitest';
import { APIConnectionError, APIError, APIUserAbortError } from '@anthropic-ai/sdk';
import { classifyFailure, errorTypeOf, toRemoteApiError } from '../../src/api/classify.js';

function apiError(status: number, type = 'api_error'): APIError {
  return APIError.generate(status, { type: 'error', error: { type, message: 'x' } }, 'x', new Headers({ 'request-id': 'req_1' }));
}

describe('classifyFailure', () => {
  const rows: Array<{ description: string; error: unknown; expected: string }> = [
    { description: '400 invalid request is fatal', error: apiError(400), expected: 'fatal' },
    { description: '401 bad credential is fatal', error: apiError(401), expected: 'fatal' },
    { description: '403 is fatal', error: apiError(403), expected: 'fatal' },
    { description: '404 is fatal', error: apiError(404), expected: 'fatal' },
    { description: '412 precondition is fatal', error: apiError(412), expected: 'fatal' },
    { description: '413 too large is fatal', error: apiError(413), expected: 'fatal' },
    { description: '408 timeout is transient', error: apiError(408), expected: 'transient' },
    { description: '409 race is transient', error: apiError(409), expected: 'transient' },
    { description: '429 rate limit is transient', error: apiError(429), expected: 'transient' },
    { description: '500 is transient', error: apiError(500), expected: 'transient' },
    { description: '503 is transient', error: apiError(503), expected: 'transient' },
    { description: 'a network failure is transient', error: new APIConnectionError({ message: 'reset' }), expected: 'transient' },
    { description: 'our own abort is aborted', error: new APIUserAbortError(), expected: 'aborted' },
    { description: 'a plain error is transient', error: new Error('boom'), expected: 'transient' },
  ];
  for (const row of rows) {
    it(row.description, () => {
      expect(classifyFailure(row.error)).toBe(row.expected);
    });
  }
});

describe('toRemoteApiError', () => {
  it('keeps the status, the request id and the retry verdict', () => {
    const e = toRemoteApiError(apiError(503), 'listing memories');
    expect(e.code).toBe('MAW_REMOTE_API');
    expect(e.status).toBe(503);
    expect(e.requestId).toBe('req_1');
    expect(e.retryable).toBe(true);
    expect(e.message).toContain('listing memories failed with HTTP 503');
  });

  it('reads the error type from the body', () => {
    expect(errorTypeOf(apiError(409, 'memory_precondition_failed_error'))).toBe('memory_precondition_failed_error');
  });
});
