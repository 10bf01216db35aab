// The hand-over of a sandbox's loopback listener to the worker's egress proxy, over a real Node IPC
// channel, with a stand-in host on the host's loopback in place of the sandboxed one (the launcher
// stands where bubblewrap would and applies its --setenv). A host that sends its listener has its
// connections judged by the proxy (loopback refused, before any dial); a host that sends anything
// else (a listener on another port, a unix listener, a connected socket, no handle, a message of
// another shape) fails to start, with the handle closed in the worker; the worker's copy of an
// adopted listener is closed with the host. The real host, given a network but no channel, fails
// with its own reason. Only loopback is dialled.
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkHandedListener } from '../../../src/sandbox/network/egress-listener.js';
import type { EgressRefusal } from '../../../src/sandbox/network/egress-proxy.js';
import { SessionEgress } from '../../../src/sandbox/network/session-egress.js';
import { ToolHostProcess } from '../../../src/sandbox/tool-host-process.js';
import { NO_BOUNDS } from '../../../src/sandbox/launcher.js';
import type { HostInit } from '../../../src/sandbox/protocol.js';

const HOST = fileURLToPath(new URL('./fixtures/hand-over-host.cjs', import.meta.url));

// Stands where bubblewrap would: applies each --setenv, skips its other options, runs the command.
const LAUNCHER = `#!/bin/sh
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --setenv) export "$2=$3"; shift 3 ;;
    --info-fd) shift 2 ;;
    *) shift ;;
  esac
done
shift
exec "$@"
`;

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Everything a raw request to 127.0.0.1:port gets back, or the connection's error code. */
function ask(port: number, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let out = '';
    s.setTimeout(5_000, () => s.destroy());
    s.on('data', (d: Buffer) => (out += d.toString('latin1')));
    s.on('error', (e: NodeJS.ErrnoException) => resolve(`error ${e.code ?? e.message}`));
    s.on('close', () => resolve(out));
    s.write(bytes);
  });
}

function openDescriptors(): number {
  return fs.readdirSync('/proc/self/fd').length;
}

describe('the egress listener hand-over', () => {
  let dir: string;
  let egress: SessionEgress;
  let refusals: EgressRefusal[];
  let warnings: Array<Record<string, unknown>>;
  let hosts: ToolHostProcess[];
  let loopback: net.Server;
  let loopbackHits: number;

  beforeEach(async () => {
    dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-hand-over-'));
    await fsp.writeFile(path.join(dir, 'launch'), LAUNCHER, { mode: 0o755 });
    refusals = [];
    warnings = [];
    hosts = [];
    egress = new SessionEgress({ type: 'unrestricted', allowPrivate: [] }, { onRefused: (r) => refusals.push(r) });
    loopbackHits = 0;
    loopback = net.createServer((s) => (loopbackHits++, s.end('HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsecret\n')));
    await new Promise<void>((r) => loopback.listen(0, '127.0.0.1', r));
  });
  afterEach(async () => {
    for (const h of hosts) await h.close();
    await egress.close();
    await new Promise<void>((r) => loopback.close(() => r()));
    await fsp.rm(dir, { recursive: true, force: true });
  });

  function start(mode: string, port: number): ToolHostProcess {
    const log = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line) as Record<string, unknown>) });
    const host = new ToolHostProcess({
      launch: {
        bwrap: path.join(dir, 'launch'),
        args: ['--clearenv', '--', process.execPath, HOST, mode, String(port), path.join(dir, 'port')],
        seccomp: undefined,
        bounds: NO_BOUNDS,
      },
      init: initWithEgress(dir, port),
      log,
      egress,
    });
    hosts.push(host);
    return host;
  }

  it("serves the sandbox's listener with the proxy, which still refuses loopback, and closes it with the host", async () => {
    const port = await freePort();
    const host = start('good', port);
    expect(await host.ready()).toBeUndefined();
    const target = (loopback.address() as net.AddressInfo).port;
    const answer = await ask(port, `GET http://127.0.0.1:${target}/ HTTP/1.1\r\nHost: 127.0.0.1:${target}\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    expect(answer).toContain('X-Sandbox-Egress-Rule: loopback');
    const tunnel = await ask(port, `CONNECT 127.0.0.1:${target} HTTP/1.1\r\n\r\n`);
    expect(tunnel).toMatch(/^HTTP\/1\.1 403 /);
    expect(loopbackHits).toBe(0);
    expect(refusals.map((r) => [r.host, r.rule])).toEqual([
      ['127.0.0.1', 'loopback'],
      ['127.0.0.1', 'loopback'],
    ]);
    // The stand-in closed its own copy: once the host ends, nothing listens there any more.
    await host.close();
    expect(await ask(port, 'GET / HTTP/1.1\r\n\r\n')).toBe('error ECONNREFUSED');
  }, 30_000);

  for (const mode of ['wrong-port', 'unix', 'connected', 'no-handle', 'extra-key'] as const) {
    it(`refuses a host that hands over ${mode === 'no-handle' ? 'no handle' : mode === 'extra-key' ? 'a message of another shape' : `a ${mode} socket`}, and keeps no descriptor of it`, async () => {
      const port = await freePort();
      const before = openDescriptors();
      const host = start(mode, port);
      const problem = await host.ready();
      expect(problem).toMatch(/^the tool host handed over /);
      expect(host.alive).toBe(false);
      expect(warnings.map((w) => w['msg'])).toContain('sandbox tool host handed over something other than its network listener; refused');
      await host.close();
      // A listener the worker refused is closed there too: nothing answers on its port.
      if (mode === 'wrong-port' || mode === 'extra-key') {
        const handed = Number(await fsp.readFile(path.join(dir, 'port'), 'utf8'));
        expect(await ask(handed, 'GET / HTTP/1.1\r\n\r\n')).toBe('error ECONNREFUSED');
      }
      expect(openDescriptors()).toBeLessThanOrEqual(before);
      expect(refusals).toEqual([]);
    }, 30_000);
  }
});

/** The host's init message for a sandbox whose egress listens on `port`. */
function initWithEgress(dir: string, port: number): HostInit {
  return {
    t: 'init',
    workdir: dir,
    allowedRoots: [],
    readOnlyRoots: [],
    maxFileBytes: undefined,
    egress: { port },
  };
}

describe('a tool host with a network but no channel', () => {
  it("fails to start, and its own reason reaches the worker (its stderr, with no shell's rc file in it)", async () => {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-no-channel-'));
    try {
      await fsp.writeFile(path.join(dir, 'launch'), LAUNCHER, { mode: 0o755 });
      const entry = fileURLToPath(new URL('../../../dist/sandbox/tool-host.cjs', import.meta.url));
      const host = new ToolHostProcess({
        launch: { bwrap: path.join(dir, 'launch'), args: ['--', process.execPath, entry], seccomp: undefined, bounds: NO_BOUNDS },
        init: initWithEgress(dir, await freePort()),
        log: pino({ level: 'silent' }),
      });
      const problem = await host.ready();
      await host.close();
      expect(problem).toContain('it has no channel to hand its network listener to the worker');
      expect(problem).not.toContain('bashrc');
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  }, 30_000);
});

describe('checkHandedListener', () => {
  it('accepts only a TCP listener on 127.0.0.1 at the port, and closes anything else', async () => {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    expect(checkHandedListener({ t: 'egress-listener' }, server, port)).toEqual({ listener: server });
    expect(server.listening).toBe(true);
    const other = checkHandedListener({ t: 'egress-listener' }, server, port + 1);
    expect(other).toEqual({ problem: `a listening socket on 127.0.0.1:${port}, not on 127.0.0.1:${port + 1}` });
    expect(server.listening).toBe(false);
    expect(checkHandedListener({ t: 'other' }, undefined, port)).toEqual({
      problem: 'a message other than its network listener ({"t":"other"})',
    });
    expect(checkHandedListener('egress-listener', undefined, port)).toMatchObject({ problem: expect.stringContaining('a message other') });
    expect(checkHandedListener({ t: 'egress-listener' }, { close: 1 }, port)).toEqual({
      problem: 'a handle that is not a listening TCP socket (Object)',
    });
  });
});
