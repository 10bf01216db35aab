/**
 * Pins the buffered transport over HTTPS, the scheme every production call uses, against a real
 * TLS server on 127.0.0.1 with a test-only self-signed certificate (test/api/fixtures):
 * - in a process that trusts that certificate (NODE_EXTRA_CA_CERTS), posts go through it, directly
 *   and from an SDK client, their answers come back parsed, and they share one kept-alive
 *   connection with the listing-page GETs read into lent buffers;
 * - in a process that does not, the certificate is refused: the request fails as a connection
 *   error and the server never sees a request (a man in the middle gets no body).
 */
import Anthropic from '@anthropic-ai/sdk';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { bufferedFetch, withBufferedPosts } from '../../src/api/buffered-fetch.js';
import { isConnectionError } from '../../src/api/classify.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const CERT = path.join(FIXTURES, 'test-only-localhost.crt');
const KEY = path.join(FIXTURES, 'test-only-localhost.key');

interface TlsServer {
  base: string;
  requests: Array<{ method: string; url: string; body: string }>;
  connections: () => number;
  close(): Promise<void>;
}

let server: TlsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function tlsServer(host: 'localhost' | '127.0.0.1'): Promise<TlsServer> {
  const requests: TlsServer['requests'] = [];
  let connections = 0;
  const srv = https.createServer({ key: fs.readFileSync(KEY), cert: fs.readFileSync(CERT) }, (req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      requests.push({ method: req.method ?? '', url: req.url ?? '', body });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ echo: JSON.parse(body || 'null'), seen: requests.length }));
    });
  });
  srv.on('secureConnection', () => connections++);
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return {
    base: `https://${host}:${(srv.address() as AddressInfo).port}`,
    requests,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        srv.closeAllConnections();
        srv.close(() => resolve());
      }),
  };
}

function runClient(base: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(FIXTURES, 'https-client.ts'), base], {
      env: { ...process.env, NODE_EXTRA_CA_CERTS: CERT },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('the buffered transport over HTTPS', () => {
  it.each(['localhost', '127.0.0.1'] as const)(
    'posts to a trusted server at %s, directly and from an SDK client, over one kept-alive connection',
    async (host) => {
      server = await tlsServer(host);
      const run = await runClient(server.base);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual({
        direct: [
          { status: 200, body: { echo: { n: 1 }, seen: 1 } },
          { status: 200, body: { echo: { n: 2 }, seen: 2 } },
        ],
        pages: [
          { status: 200, body: { echo: null, seen: 3 } },
          { status: 200, body: { echo: null, seen: 4 } },
        ],
        viaSdk: { echo: { n: 3 }, seen: 5 },
      });
      expect(server.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
        'POST /v1/echo',
        'POST /v1/echo',
        'GET /v1/page?n=1',
        'GET /v1/page?n=2',
        'POST /v1/echo',
      ]);
      // Posts and pages share one kept-alive connection.
      expect(server.connections()).toBe(1);
    },
    30_000,
  );

  it('refuses a server whose certificate it does not trust, before sending anything', async () => {
    server = await tlsServer('localhost');
    const failure = await bufferedFetch(1024)(`${server.base}/v1/echo`, { method: 'POST', body: '{"secret":"x"}' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(TypeError);
    expect(String((failure as { cause?: { code?: string } }).cause?.code)).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY/);

    const client = withBufferedPosts(new Anthropic({ apiKey: 'sk-ant-test', baseURL: server.base, logLevel: 'off', maxRetries: 0 }), 1024);
    const sdkFailure = await client.post('/v1/echo', { body: { secret: 'x' } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isConnectionError(sdkFailure)).toBe(true);

    const pageFailure = await bufferedFetch(1024, {
      lend: (n: number) => ({ bytes: Buffer.alloc(n), done: () => {} }),
      stallTimeoutMs: 1_000,
    })(`${server.base}/v1/page`).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(pageFailure).toBeInstanceOf(TypeError);
    expect(String((pageFailure as { cause?: { code?: string } }).cause?.code)).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY/);
    expect(server.requests).toEqual([]);
  });
});
