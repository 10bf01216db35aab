// Pins ANTHROPIC_CUSTOM_HEADERS: parsed into headers (malformed lines refused by number, never by
// content), treated as a credential (gone from the environment children inherit), and still sent
// by the clients the CLI builds, checked over real HTTP.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/cli.js';
import { customHeadersFrom } from '../../src/cli/custom-headers.js';
import { doctorCommand } from '../../src/cli/doctor/command.js';
import type { CliIo } from '../../src/cli/io.js';
import { takeCredentials } from '../../src/cli/secrets.js';
import { ConfigError } from '../../src/errors.js';

describe('customHeadersFrom', () => {
  const rows: Array<{ description: string; value: string | undefined; headers?: Record<string, string> | undefined; error?: RegExp }> = [
    { description: 'unset gives no headers', value: undefined, headers: undefined },
    { description: 'blank gives no headers', value: ' \n ', headers: undefined },
    { description: 'one header, spaces trimmed', value: 'X-Gateway-Auth:  Bearer abc ', headers: { 'X-Gateway-Auth': 'Bearer abc' } },
    {
      description: 'several lines, CRLF and blank lines, a colon inside the value',
      value: 'A: 1\r\n\r\nB-C: http://x:8080/y\n',
      headers: { A: '1', 'B-C': 'http://x:8080/y' },
    },
    { description: 'an empty value is kept', value: 'X-Empty:', headers: { 'X-Empty': '' } },
    {
      description: 'a line without a colon is refused by its number',
      value: 'A: 1\nBearer secret-value',
      error: /line 2: expected "Name: value"/,
    },
    { description: 'a name with a space is refused', value: 'Bad Name: secret-value', error: /line 1/ },
    { description: 'a line starting with a colon is refused', value: ': secret-value', error: /line 1/ },
  ];
  for (const row of rows) {
    it(row.description, () => {
      const env = row.value === undefined ? {} : { ANTHROPIC_CUSTOM_HEADERS: row.value };
      if (row.error === undefined) {
        expect(customHeadersFrom(env)).toEqual(row.headers);
        return;
      }
      let thrown: unknown;
      try {
        customHeadersFrom(env);
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as Error).message).toMatch(row.error);
      expect((thrown as Error).message).not.toContain('secret-value');
    });
  }
});

describe('the CLI and ANTHROPIC_CUSTOM_HEADERS', () => {
  let server: http.Server | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  it('is removed from the environment children inherit and kept in the snapshot', () => {
    const env: NodeJS.ProcessEnv = { ANTHROPIC_CUSTOM_HEADERS: 'X-Auth: s3cret', ANTHROPIC_BASE_URL: 'http://x' };
    const { snapshot } = takeCredentials(env);
    expect(env).toEqual({ ANTHROPIC_BASE_URL: 'http://x' });
    expect(snapshot['ANTHROPIC_CUSTOM_HEADERS']).toBe('X-Auth: s3cret');
  });

  it("is sent by the CLI's client after it left the environment", async () => {
    const seen: http.IncomingHttpHeaders[] = [];
    server = http.createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(200, { 'content-type': 'application/json', date: new Date().toUTCString() });
      res.end(JSON.stringify({ data: [], next_page: null }));
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-headers-'));
    const env: NodeJS.ProcessEnv = {
      ANTHROPIC_CUSTOM_HEADERS: 'X-Gateway-Auth: Bearer gw-123\nX-Team: memory',
      ANTHROPIC_ENVIRONMENT_ID: 'env_1',
      ANTHROPIC_ENVIRONMENT_KEY: 'sk-env-key',
      ANTHROPIC_BASE_URL: `http://127.0.0.1:${port}`,
    };
    const io: CliIo & { out: string; err: string } = {
      out: '',
      err: '',
      env,
      cwd: dir,
      stdout: (t) => void (io.out += t),
      stderr: (t) => void (io.err += t),
    };
    await runCli(['doctor', '--json', '--mount-parent', dir], io, [doctorCommand()]);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen[0]!['x-gateway-auth']).toBe('Bearer gw-123');
    expect(seen[0]!['x-team']).toBe('memory');
    expect(env['ANTHROPIC_CUSTOM_HEADERS']).toBeUndefined();
    expect(io.out + io.err).not.toContain('gw-123');
  });
});
