// The egress proxy under attack, driven over raw sockets with its resolver and dialer injected:
// the dialer records the address it is asked for and connects to a loopback stand-in instead, so
// no test traffic leaves loopback and every refusal is asserted where it is decided, before any
// dial. A name that resolves to a refused address, a name whose answer changes between check and
// dial, a CONNECT to a refused IP literal, an absolute-URI request for the host's loopback, and
// bytes smuggled after a CONNECT each end refused (or confined to the checked tunnel).
import * as http from 'node:http';
import * as net from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { EgressPolicy } from '../../../src/sandbox/network/egress-policy.js';
import { EgressProxy, type EgressRefusal } from '../../../src/sandbox/network/egress-proxy.js';

const PUBLIC = '93.184.215.14';

interface Rig {
  proxyPort: number;
  /** The stand-in every allowed dial reaches, and what it was sent (raw). */
  standIn: { received: string[] };
  /** A listener on the host's loopback the agent must never reach. */
  loopback: { port: number; connections: number };
  dials: Array<{ address: string; port: number }>;
  lookups: string[];
  refusals: EgressRefusal[];
  answers: Map<string, string[][]>;
}

let rig: Rig;
let closers: Array<() => Promise<void>> = [];

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(() => new Promise((r) => server.close(() => r())));
  return (server.address() as net.AddressInfo).port;
}

async function start(policy: EgressPolicy = { type: 'unrestricted', allowPrivate: [] }, maxConnections?: number): Promise<void> {
  const received: string[] = [];
  const standIn = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      received.push(`${req.method} ${req.url} ${JSON.stringify(req.headers)} ${body}`);
      res.end(`stand-in answered ${req.method} ${req.url}`);
    });
  });
  const rawSeen: string[] = [];
  standIn.on('connection', (s: net.Socket) => s.on('data', (d: Buffer) => rawSeen.push(d.toString('latin1'))));
  const standInPort = await listen(standIn);
  const loopback = { port: 0, connections: 0 };
  loopback.port = await listen(net.createServer((s) => (loopback.connections++, s.end('loopback secret\n'))));
  const dials: Rig['dials'] = [];
  const lookups: string[] = [];
  const refusals: EgressRefusal[] = [];
  const answers = new Map<string, string[][]>();
  const proxy = new EgressProxy(policy, {
    onRefused: (r) => refusals.push(r),
    ...(maxConnections !== undefined ? { maxConnections } : {}),
    io: {
      resolve: async (host) => {
        lookups.push(host);
        const queue = answers.get(host);
        if (!queue || queue.length === 0) throw new Error(`ENOTFOUND ${host}`);
        return queue.length > 1 ? queue.shift()! : queue[0]!;
      },
      dial: (address, port) => {
        dials.push({ address, port });
        return net.connect({ host: '127.0.0.1', port: standInPort });
      },
      hostAddresses: () => ['192.168.50.2'],
    },
  });
  await proxy.listen({ host: '127.0.0.1', port: 0 });
  closers.push(() => proxy.close());
  rig = {
    proxyPort: (proxy.address() as net.AddressInfo).port,
    standIn: { received: rawSeen },
    loopback,
    dials,
    lookups,
    refusals,
    answers,
  };
}

/** Send raw bytes to the proxy; everything it answers until it closes (or 3 s of silence). */
function raw(bytes: string, opts: { thenSend?: string } = {}): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(rig.proxyPort, '127.0.0.1');
    let out = '';
    let timer = setTimeout(() => s.destroy(), 3_000);
    s.on('data', (d: Buffer) => {
      out += d.toString('latin1');
      clearTimeout(timer);
      if (opts.thenSend !== undefined && out.includes('\r\n\r\n')) {
        s.write(opts.thenSend);
        opts.thenSend = undefined;
      }
      timer = setTimeout(() => s.destroy(), 1_000);
    });
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    s.write(bytes);
  });
}

beforeEach(() => {
  closers = [];
});
afterEach(async () => {
  for (const c of closers.reverse()) await c();
});

describe('the egress proxy under attack', () => {
  it('refuses a name that resolves to a refused address, before any dial', async () => {
    await start();
    rig.answers.set('metadata.evil.example', [['169.254.169.254']]);
    rig.answers.set('intranet.evil.example', [['10.0.0.1']]);
    const a = await raw('GET http://metadata.evil.example/latest/meta-data/ HTTP/1.1\r\nHost: metadata.evil.example\r\n\r\n');
    const b = await raw('CONNECT intranet.evil.example:443 HTTP/1.1\r\nHost: intranet.evil.example:443\r\n\r\n');
    expect(a).toMatch(/^HTTP\/1\.1 403 /);
    expect(a).toContain('X-Sandbox-Egress-Rule: link-local');
    expect(a).toContain('(rule: link-local)');
    expect(b).toMatch(/^HTTP\/1\.1 403 /);
    expect(b).toContain('X-Sandbox-Egress-Rule: private');
    expect(rig.dials).toEqual([]);
    expect(rig.refusals).toEqual([
      expect.objectContaining({ host: 'metadata.evil.example', port: 80, rule: 'link-local', address: '169.254.169.254' }),
      expect.objectContaining({ host: 'intranet.evil.example', port: 443, rule: 'private', address: '10.0.0.1' }),
    ]);
  });

  it('resolves a name once and dials the address it checked, whatever the name answers next', async () => {
    await start();
    // The first answer is public, every later one the host's loopback (DNS rebinding).
    rig.answers.set('rebind.example', [[PUBLIC], ['127.0.0.1']]);
    const first = await raw('GET http://rebind.example/x HTTP/1.1\r\nHost: rebind.example\r\nConnection: close\r\n\r\n');
    expect(first).toMatch(/^HTTP\/1\.1 200 /);
    expect(first).toContain('stand-in answered GET /x');
    expect(rig.lookups).toEqual(['rebind.example']);
    expect(rig.dials).toEqual([{ address: PUBLIC, port: 80 }]);
    const second = await raw('CONNECT rebind.example:80 HTTP/1.1\r\n\r\n');
    expect(second).toMatch(/^HTTP\/1\.1 403 /);
    expect(second).toContain('X-Sandbox-Egress-Rule: loopback');
    expect(rig.dials).toHaveLength(1);
    expect(rig.loopback.connections).toBe(0);
  });

  it('refuses a CONNECT to a refused IP literal in every spelling, without resolving or dialling', async () => {
    await start();
    const targets = [
      ['169.254.169.254:80', 'link-local'],
      ['10.1.2.3:443', 'private'],
      ['100.64.0.1:443', 'shared'],
      ['[::ffff:127.0.0.1]:22', 'loopback'],
      ['[fd00::1]:443', 'private'],
      ['[fe80::1]:443', 'link-local'],
      ['0.0.0.0:80', 'unspecified'],
      ['224.0.0.1:80', 'multicast'],
      ['192.168.50.2:22', 'host-address'],
    ] as const;
    for (const [authority, rule] of targets) {
      const answer = await raw(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
      expect(answer, authority).toMatch(/^HTTP\/1\.1 403 /);
      expect(answer, authority).toContain(`X-Sandbox-Egress-Rule: ${rule}`);
    }
    expect(rig.lookups).toEqual([]);
    expect(rig.dials).toEqual([]);
  });

  it("refuses an absolute-URI request for the host's loopback, by address and by name", async () => {
    await start();
    rig.answers.set('localhost', [['127.0.0.1', '::1']]);
    const port = rig.loopback.port;
    for (const url of [`http://127.0.0.1:${port}/`, `http://localhost:${port}/`, `http://[::1]:${port}/`, `http://2130706433:${port}/`]) {
      const answer = await raw(`GET ${url} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(answer, url).toMatch(/^HTTP\/1\.1 403 /);
      expect(answer, url).toContain('X-Sandbox-Egress-Rule: loopback');
    }
    expect(rig.dials).toEqual([]);
    expect(rig.loopback.connections).toBe(0);
  });

  it('reads no request smuggled after a refused CONNECT', async () => {
    await start();
    rig.answers.set('public.example', [[PUBLIC]]);
    const smuggled = 'GET http://public.example/smuggled HTTP/1.1\r\nHost: public.example\r\n\r\n';
    const answer = await raw(`CONNECT 169.254.169.254:80 HTTP/1.1\r\nHost: x\r\n\r\n${smuggled}`);
    expect(answer.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    expect(answer).toContain('X-Sandbox-Egress-Rule: link-local');
    expect(rig.lookups).toEqual([]);
    expect(rig.dials).toEqual([]);
  });

  it('sends bytes that follow an allowed CONNECT to the checked address only, as tunnel data', async () => {
    await start();
    rig.answers.set('public.example', [[PUBLIC]]);
    const inner = `GET http://127.0.0.1:${rig.loopback.port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`;
    const answer = await raw(`CONNECT public.example:80 HTTP/1.1\r\nHost: public.example:80\r\n\r\n${inner}`);
    expect(answer).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\n/);
    // The stand-in (the checked public address) got the inner request verbatim; the proxy made no second decision.
    expect(rig.standIn.received.join('')).toContain(`GET http://127.0.0.1:${rig.loopback.port}/`);
    expect(answer).toContain(`stand-in answered GET http://127.0.0.1:${rig.loopback.port}/`);
    expect(rig.lookups).toEqual(['public.example']);
    expect(rig.dials).toEqual([{ address: PUBLIC, port: 80 }]);
    expect(rig.loopback.connections).toBe(0);
  });

  it('forwards a plain request with its body, without the proxy credentials', async () => {
    await start();
    rig.answers.set('public.example', [[PUBLIC]]);
    const body = 'hello=world';
    const answer = await raw(
      `POST http://public.example:8080/form?q=1 HTTP/1.1\r\nHost: public.example:8080\r\nProxy-Authorization: Basic c2VjcmV0\r\n` +
        `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain('stand-in answered POST /form?q=1');
    const seen = rig.standIn.received.join('');
    expect(seen).toContain('POST /form?q=1 HTTP/1.1');
    expect(seen).toContain(body);
    expect(seen.toLowerCase()).not.toContain('proxy-authorization');
    expect(rig.dials).toEqual([{ address: PUBLIC, port: 8080 }]);
  });

  it('answers 400 to a request that names no http:// target', async () => {
    await start();
    const answer = await raw('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(rig.dials).toEqual([]);
  });

  it('under limited, refuses an unlisted name without resolving it', async () => {
    await start({ type: 'limited', allowedHosts: ['allowed.example'], allowPackageManagers: false, mcpServerHosts: [], allowPrivate: [] });
    rig.answers.set('allowed.example', [[PUBLIC]]);
    rig.answers.set('other.example', [[PUBLIC]]);
    const refused = await raw('CONNECT other.example:443 HTTP/1.1\r\n\r\n');
    expect(refused).toContain('X-Sandbox-Egress-Rule: host-not-allowed');
    expect(rig.lookups).toEqual([]);
    const allowed = await raw('CONNECT allowed.example:443 HTTP/1.1\r\n\r\n');
    expect(allowed).toMatch(/^HTTP\/1\.1 200 /);
    expect(rig.lookups).toEqual(['allowed.example']);
    expect(rig.dials).toEqual([{ address: PUBLIC, port: 443 }]);
  });

  it('closes connections past its bound, so an agent cannot exhaust the worker', async () => {
    await start({ type: 'unrestricted', allowPrivate: [] }, 2);
    rig.answers.set('public.example', [[PUBLIC]]);
    const held: net.Socket[] = [];
    for (let i = 0; i < 2; i++) {
      const s = net.connect(rig.proxyPort, '127.0.0.1');
      await new Promise((r) => s.once('connect', r));
      held.push(s);
    }
    // Let the server count both before the third arrives.
    await new Promise((r) => setTimeout(r, 100));
    const third = await raw('CONNECT public.example:80 HTTP/1.1\r\n\r\n');
    expect(third).toBe('');
    expect(rig.dials).toEqual([]);
    for (const s of held) s.destroy();
  });
});
