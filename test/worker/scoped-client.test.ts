/**
 * Pins the credential of per-item calls: a scoped client sends the item's token as its only
 * credential, whatever the app's client carries. An `Authorization` or `X-Api-Key` among the app's
 * default headers (a record, a `Headers`, an array of pairs; any case) is dropped, since the SDK
 * sends default headers after its own credential; the app's other default headers are kept. The
 * SDK keeps a client's options on `_options` (a member its types mark protected): these tests fail
 * if that goes.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scopedClient } from '../../src/worker/scoped-client.js';

let server: http.Server;
let baseURL = '';
let seen: http.IncomingHttpHeaders[] = [];
beforeAll(async () => {
  server = http.createServer((req, res) => {
    seen.push(req.headers);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function headersSent(
  defaultHeaders: ConstructorParameters<typeof Anthropic>[0] extends infer O ? (O extends { defaultHeaders?: infer H } ? H : never) : never,
) {
  seen = [];
  const app = new Anthropic({ apiKey: 'sk-ant-api-app-key', baseURL, logLevel: 'off', maxRetries: 0, defaultHeaders });
  await scopedClient(app, 'item-token').get('/v1/probe');
  expect(seen).toHaveLength(1);
  return seen[0]!;
}

describe('a scoped client', () => {
  const shapes = [
    ['a record', { Authorization: 'Bearer app-secret', 'X-Api-Key': 'app-key', 'x-team': 'blue' }],
    ['a Headers', new Headers({ authorization: 'Bearer app-secret', 'x-api-key': 'app-key', 'x-team': 'blue' })],
    [
      'pairs',
      [
        ['AUTHORIZATION', 'Bearer app-secret'],
        ['X-API-KEY', 'app-key'],
        ['x-team', 'blue'],
      ],
    ],
  ] as const;
  it.each(shapes)("drops credential headers among the app's default headers (%s) and keeps the others", async (_shape, defaults) => {
    const headers = await headersSent(defaults as never);
    expect(headers['authorization']).toBe('Bearer item-token');
    expect(headers['x-api-key']).toBeUndefined();
    expect(headers['x-team']).toBe('blue');
  });

  it('sends only the item token when the app has no default headers, and keeps the base URL', async () => {
    const headers = await headersSent(null);
    expect(headers['authorization']).toBe('Bearer item-token');
    expect(headers['x-api-key']).toBeUndefined();
  });

  it("leaves the app's own client as it was", async () => {
    seen = [];
    const app = new Anthropic({
      apiKey: 'sk-ant-api-app-key',
      baseURL,
      logLevel: 'off',
      maxRetries: 0,
      defaultHeaders: { 'x-team': 'blue', 'x-api-key': 'app-key' },
    });
    scopedClient(app, 'item-token');
    await app.get('/v1/probe');
    expect(seen[0]!['x-api-key']).toBe('app-key');
  });
});
