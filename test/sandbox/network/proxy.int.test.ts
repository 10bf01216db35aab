// A session's sandbox reaching a "public" test host only through its egress proxy, with real
// bubblewrap and real tools: curl, python and git over HTTP and over HTTPS (CONNECT) reach the
// test host (in a network namespace this test makes; its range is allowed with allowPrivate, since
// the proxy refuses the benchmarking range by default, which the second test shows); a direct
// connection, past the proxy variables, reaches nothing (the sandbox has no route out); the host's
// own address is refused even inside an allowed range; `limited` reaches only its list. Every
// refusal reaches the session's callback with its rule. Runs as root (it makes a namespace).
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EgressRefusal } from '../../../src/sandbox/network/egress-proxy.js';
import type { SandboxNetworkOption } from '../../../src/sandbox/network/network-option.js';
import { resolveSandboxOption } from '../../../src/sandbox/options.js';
import { resolveSandbox } from '../../../src/sandbox/resolve.js';
import { SessionSandbox } from '../../../src/sandbox/session-sandbox.js';
import { startTestHost, type TestHost } from './test-netns.js';

const log = pino({ level: 'silent' });
const PY = '/usr/bin/python3';

let testHost: TestHost;
let hostListener: net.Server;
let hostListenerPort: number;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  testHost = await startTestHost();
  // A service on the worker host's own side of the veth pair, inside the allowed range.
  hostListener = net.createServer((s) => s.end('HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhost secret\n'));
  await new Promise<void>((r) => hostListener.listen(0, testHost.hostSide, r));
  hostListenerPort = (hostListener.address() as net.AddressInfo).port;
}, 60_000);

afterAll(async () => {
  for (const c of cleanups) await c();
  await new Promise<void>((r) => (hostListener ? hostListener.close(() => r()) : r()));
  await testHost?.close();
});

async function session(network: SandboxNetworkOption): Promise<{ bash(command: string): Promise<string>; refusals: EgressRefusal[] }> {
  const work = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-net-'));
  const runtime = await resolveSandbox(resolveSandboxOption({ mode: 'bwrap', network }), { log, concurrency: 1 });
  if (runtime.kind !== 'bwrap') throw new Error('the sandbox did not start');
  const refusals: EgressRefusal[] = [];
  const sandbox = new SessionSandbox(
    runtime,
    { workdir: work, allowedRoots: [], readOnlyRoots: [], maxFileBytes: undefined, hide: [], onEgressRefused: (r) => refusals.push(r) },
    log,
  );
  cleanups.push(async () => {
    await sandbox.close();
    await fsp.rm(work, { recursive: true, force: true });
  });
  const bash = sandbox.tools().find((t) => t.name === 'bash')!;
  return {
    refusals,
    bash: async (command) => {
      try {
        const out = await bash.run({ command: `{ ${command}; } 2>&1; echo "exit=$?"` }, undefined);
        return typeof out === 'string' ? out : JSON.stringify(out);
      } catch (e) {
        return `tool error: ${(e as Error).message}`;
      }
    },
  };
}

const allowTestRange: SandboxNetworkOption = { type: 'unrestricted', allowPrivate: ['198.18.0.0/15'] };

describe('the default network (unrestricted) through the egress proxy', () => {
  it('curl, python and git reach the test host over HTTP and HTTPS through the proxy, and nothing without it', async () => {
    const s = await session(allowTestRange);
    const a = testHost.address;
    expect(await s.bash(`curl -sS -m 20 http://${a}:8080/hello`)).toContain('hello from the test host via 8080\nexit=0');
    expect(await s.bash(`curl -sS -m 20 -k https://${a}:8443/hello`)).toContain('hello from the test host via 8443\nexit=0');
    const py = (url: string): string =>
      `${PY} -c "import ssl,urllib.request as u; print(u.urlopen('${url}', context=ssl._create_unverified_context(), timeout=20).read().decode(), end='')"`;
    expect(await s.bash(py(`http://${a}:8080/hello`))).toContain('hello from the test host via 8080\nexit=0');
    expect(await s.bash(py(`https://${a}:8443/hello`))).toContain('hello from the test host via 8443\nexit=0');
    expect(await s.bash(`git clone -q http://${a}:8080/repo.git r1 && cat r1/README.md`)).toContain('cloned through the proxy\nexit=0');
    expect(await s.bash(`git -c http.sslVerify=false clone -q https://${a}:8443/repo.git r2 && cat r2/README.md`)).toContain(
      'cloned through the proxy\nexit=0',
    );
    // Past the proxy variables, the sandbox's own namespace has no route to anything.
    const direct = await s.bash(`curl -sS -m 5 --noproxy '*' http://${a}:8080/hello`);
    expect(direct).not.toContain('hello from the test host');
    expect(direct).toMatch(/exit=(7|28)/);
    expect(s.refusals).toEqual([]);
  }, 120_000);

  it("serves the sandbox's 127.0.0.1:3128 from the worker: no process inside holds that listener or the host's channel", async () => {
    const s = await session(allowTestRange);
    expect(await s.bash(`curl -sS -m 20 http://${testHost.address}:8080/hello`)).toContain('hello from the test host via 8080\nexit=0');
    // 3128 is 0C38; state 0A is LISTEN. The socket exists in the sandbox's namespace, held by the worker alone.
    const holders = await s.bash(
      `inode=$(awk '$2 == "0100007F:0C38" && $4 == "0A" {print $10}' /proc/net/tcp); echo "listener=$inode"; ` +
        `for p in /proc/[0-9]*; do ls -l $p/fd 2>/dev/null; done | grep -c "socket:\\[$inode\\]"`,
    );
    expect(holders).toMatch(/listener=[1-9][0-9]*\n0\n/);
    // The host closed its IPC channel before the toolset existed. Sockets made inside are listed in
    // the sandbox's own /proc/net/unix; those the worker made (the host's stdio and, were it still
    // open, its channel) are not: the host keeps only its stdio of them, the shell none.
    const outside = (pid: string): string =>
      `ls -l /proc/${pid}/fd | awk '/socket:/ {print $9, $11}' | while read fd s; do i=\${s#socket:[}; i=\${i%]}; ` +
      `awk -v i="$i" 'NR > 1 && $7 == i {f = 1} END {exit !f}' /proc/net/unix || grep -qw "$i" /proc/net/tcp || printf '%s ' "$fd"; done; echo`;
    const channel = await s.bash(
      `tr '\\0' ' ' < /proc/$PPID/cmdline; echo; echo "host: $(${outside('$PPID')})"; echo "shell: $(${outside('$$')})"`,
    );
    expect(channel).toContain('tool-host.cjs');
    expect(channel).toMatch(/\nhost: 0 1 2 ?\n/);
    expect(channel).toMatch(/\nshell: ?\n/);
  }, 60_000);

  it("refuses the worker host's own address even inside an allowed range, and names the rule", async () => {
    const s = await session(allowTestRange);
    const out = await s.bash(`curl -sS -m 10 -i http://${testHost.hostSide}:${hostListenerPort}/`);
    expect(out).toMatch(/^HTTP\/1\.1 403 /);
    expect(out).toContain('(rule: host-address)');
    expect(out).not.toContain('host secret');
    const tunnel = await s.bash(`curl -sS -m 10 -p http://${testHost.hostSide}:${hostListenerPort}/`);
    expect(tunnel).toMatch(/403/);
    expect(tunnel).not.toContain('host secret');
    expect(s.refusals.map((r) => [r.host, r.rule])).toEqual([
      [testHost.hostSide, 'host-address'],
      [testHost.hostSide, 'host-address'],
    ]);
  }, 60_000);

  it('refuses a non-public range unless allowPrivate lifts it', async () => {
    const s = await session('unrestricted');
    const out = await s.bash(`curl -sS -m 10 -i http://${testHost.address}:8080/hello`);
    expect(out).toMatch(/^HTTP\/1\.1 403 /);
    expect(out).toContain('(rule: benchmark)');
    expect(s.refusals).toEqual([expect.objectContaining({ host: testHost.address, port: 8080, rule: 'benchmark' })]);
  }, 60_000);
});

describe('network: limited', () => {
  it('reaches its listed host and nothing else', async () => {
    const s = await session({ type: 'limited', allowedHosts: [testHost.address], allowPrivate: ['198.18.0.0/15'] });
    expect(await s.bash(`curl -sS -m 20 http://${testHost.address}:8080/hello`)).toContain('hello from the test host via 8080\nexit=0');
    const other = await s.bash(`curl -sS -m 10 -i http://${testHost.otherAddress}:8080/hello`);
    expect(other).toMatch(/^HTTP\/1\.1 403 /);
    expect(other).toContain('(rule: host-not-allowed)');
    const otherTls = await s.bash(`curl -sS -m 10 -k https://${testHost.otherAddress}:8443/hello`);
    expect(otherTls).not.toContain('hello from the test host');
    expect(s.refusals.map((r) => r.rule)).toEqual(['host-not-allowed', 'host-not-allowed']);
  }, 60_000);

  it('the same other address is reachable under unrestricted (so the refusal above is the list)', async () => {
    const s = await session(allowTestRange);
    expect(await s.bash(`curl -sS -m 20 http://${testHost.otherAddress}:8080/hello`)).toContain(
      'hello from the test host via 8080\nexit=0',
    );
  }, 60_000);
});
