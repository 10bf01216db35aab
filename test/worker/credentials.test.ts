// Pins how a work item's secret yields the sessions token: base64url or base64, padded or not; any
// other shape yields no token and says whether the secret was absent or malformed.
import { describe, expect, it } from 'vitest';
import { decodeWorkSecret, encodeWorkSecret } from '../../src/worker/credentials.js';

const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64');

describe('decodeWorkSecret', () => {
  const rows = [
    {
      description: 'base64url without padding',
      secret: encodeWorkSecret({ sessions_token: 'sk-ant-req-1' }),
      status: 'token',
      token: 'sk-ant-req-1',
    },
    { description: 'standard base64 with padding', secret: b64({ sessions_token: 'tok?>' }), status: 'token', token: 'tok?>' },
    {
      description: 'extra fields are ignored',
      secret: encodeWorkSecret({ sessions_token: 't', api_base_url: 'x', auth: [] }),
      status: 'token',
      token: 't',
    },
    { description: 'undefined is absent', secret: undefined, status: 'absent', token: null },
    { description: 'null is absent', secret: null, status: 'absent', token: null },
    { description: 'the empty string is absent', secret: '', status: 'absent', token: null },
    { description: 'not base64', secret: '!!not base64!!', status: 'malformed', token: null },
    { description: 'base64 of non-JSON', secret: Buffer.from('hello').toString('base64url'), status: 'malformed', token: null },
    { description: 'a JSON array', secret: b64(['sessions_token']), status: 'malformed', token: null },
    { description: 'a JSON string', secret: b64('sk'), status: 'malformed', token: null },
    { description: 'an empty token', secret: b64({ sessions_token: '' }), status: 'malformed', token: null },
    { description: 'a non-string token', secret: b64({ sessions_token: 7 }), status: 'malformed', token: null },
    { description: 'no token field', secret: b64({ session_ingress_token: 'x' }), status: 'malformed', token: null },
  ] as const;
  for (const row of rows) {
    it(`${row.description} → ${row.status}`, () => {
      expect(decodeWorkSecret(row.secret)).toEqual({ status: row.status, sessionsToken: row.token });
    });
  }
});
