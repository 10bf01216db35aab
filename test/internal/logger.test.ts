// Pins the short form of an expected failure in a log line: type, one-line message with an API
// body shown once as `<status> <type>: <message>`, code, status and request id; never a stack,
// never the same text twice when a wrapper repeats its cause.
import { APIConnectionError, APIError } from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { RemoteApiError } from '../../src/errors.js';
import pino from 'pino';
import { childLogger, errorSummary } from '../../src/internal/logger.js';
import { duplicateKeys } from './log-keys.js';

const body401 = { type: 'error', error: { type: 'authentication_error', message: 'invalid credential' }, request_id: 'req_1' };
const api401 = APIError.generate(401, body401, undefined, new Headers({ 'request-id': 'req_1' }));
const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });

const rows: Array<{ description: string; error: unknown; expected: Record<string, unknown> }> = [
  {
    description: 'an SDK status error shows its body once, with status and request id',
    error: api401,
    expected: { type: 'AuthenticationError', message: '401 authentication_error: invalid credential', status: 401, request_id: 'req_1' },
  },
  {
    description: 'a connection error follows its causes down to the socket error',
    error: new APIConnectionError({ cause: new TypeError('fetch failed', { cause: refused }) }),
    expected: { type: 'APIConnectionError', message: 'Connection error.: fetch failed: connect ECONNREFUSED 127.0.0.1:9' },
  },
  {
    description: 'a wrapper that already says what its cause says is not repeated',
    error: new RemoteApiError(
      'polling env_1 failed with HTTP 401: authentication_error: invalid credential',
      { status: 401, requestId: 'req_1', retryable: false },
      { cause: api401 },
    ),
    expected: {
      type: 'RemoteApiError',
      message: 'polling env_1 failed with HTTP 401: authentication_error: invalid credential',
      code: 'MAW_REMOTE_API',
      status: 401,
      request_id: 'req_1',
    },
  },
  {
    description: 'a thrown string becomes its text',
    error: 'boom',
    expected: { type: 'string', message: 'boom' },
  },
];

describe('errorSummary', () => {
  for (const row of rows) {
    it(row.description, () => {
      const summary = errorSummary(row.error);
      expect(summary).toEqual(row.expected);
      expect(JSON.stringify(summary)).not.toMatch(/\n\s+at /);
    });
  }
});

describe('childLogger', () => {
  const lines: string[] = [];
  const root = pino({ level: 'info' }, { write: (s: string) => void lines.push(s) });
  const rows: Array<{ description: string; parent: Record<string, unknown>; bindings: Record<string, unknown>; keys: string[] }> = [
    {
      description: 'a key the parent binds to the same value is not bound again',
      parent: { session_id: 's1' },
      bindings: { session_id: 's1', component: 'memory-sync' },
      keys: ['session_id', 'component'],
    },
    { description: 'a new key is bound', parent: {}, bindings: { session_id: 's1' }, keys: ['session_id'] },
  ];
  for (const row of rows) {
    it(row.description, () => {
      lines.length = 0;
      childLogger(root.child(row.parent), row.bindings).info('x');
      expect(duplicateKeys(lines[0]!)).toEqual([]);
      for (const key of row.keys) expect(JSON.parse(lines[0]!)).toHaveProperty(key);
    });
  }
});
