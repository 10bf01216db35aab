// Two sessions on the README's poll daemon at concurrency 2 (a real child process on the built
// package), session A's bash trying the host's network as a hostile agent would: a service on the
// host's loopback (directly, and through the proxy by absolute URI) and a host process's abstract
// unix socket. With the default `sandbox` (network 'unrestricted') none is reached, the proxy's
// refusal is an event and a metric; with `network: 'host'` each direct reach succeeds, so the
// assertions can fail.
import { spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startEmulator } from '../../../src/testing/index.js';

const DAEMON = fileURLToPath(new URL('./fixtures/network-daemon.mjs', import.meta.url));
const PY = '/usr/bin/python3';

interface Run {
  seen: { loopback: string; loopbackViaProxy: string; abstract: string };
  events: Array<Record<string, unknown>>;
  metrics: Record<string, number> | undefined;
  sessionA: string;
  daemonLog: string;
  loopbackHits: number;
  abstractHits: number;
}

async function runAttack(sandbox: unknown): Promise<Run> {
  const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-net-tenants-'));
  const workdir = path.join(tmp, 'work');
  await fsp.mkdir(workdir);
  const emu = await startEmulator({ mountRoot: path.join(tmp, 'mnt'), leaseTtlSeconds: 4 });
  let loopbackHits = 0;
  let abstractHits = 0;
  const loopback = net.createServer((s) => (loopbackHits++, s.end('HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\nhost loopback ok')));
  await new Promise<void>((r) => loopback.listen(0, '127.0.0.1', r));
  const port = (loopback.address() as net.AddressInfo).port;
  const abstractName = `maw-test-abstract-${process.pid}-${Date.now()}`;
  // A host process on an abstract unix socket (Python's, so the name is exactly the bytes given).
  const abstract = spawn(PY, [
    '-c',
    'import socket, sys\n' +
      's = socket.socket(socket.AF_UNIX)\n' +
      `s.bind(b"\\0${abstractName}")\n` +
      's.listen(4)\n' +
      'print("listening", flush=True)\n' +
      'while True:\n' +
      '    c, _ = s.accept()\n' +
      '    print("hit", flush=True)\n' +
      '    c.sendall(b"host abstract ok\\n")\n' +
      '    c.close()\n',
  ]);
  await new Promise<void>((resolve) =>
    abstract.stdout.on('data', (d: Buffer) => {
      abstractHits += d
        .toString()
        .split('\n')
        .filter((l) => l === 'hit').length;
      if (d.toString().includes('listening')) resolve();
    }),
  );
  let daemon: ReturnType<typeof spawn> | undefined;
  const out: string[] = [];
  try {
    const sh = (command: string): { tool: string; input: { command: string } } => ({
      tool: 'bash',
      input: { command: `{ ${command}; } 2>&1; echo "exit=$?"` },
    });
    const b = await emu.createSession({ script: [sh('sleep 2')] });
    const a = await emu.createSession({
      script: [
        sh(`curl -sS -m 5 http://127.0.0.1:${port}/`),
        sh(`curl -sS -m 5 -i --noproxy '' -x http://127.0.0.1:3128 http://127.0.0.1:${port}/`),
        sh(
          `${PY} -c "import socket; s = socket.socket(socket.AF_UNIX); s.connect('\\0${abstractName}'); print(s.recv(100).decode(), end='')"`,
        ),
      ],
    });
    daemon = spawn(process.execPath, [DAEMON], {
      env: {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
        ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
        ANTHROPIC_BASE_URL: emu.baseURL,
        TEST_WORKDIR: workdir,
        TEST_STATE_DIR: path.join(tmp, 'state'),
        ...(sandbox !== undefined ? { TEST_SANDBOX_JSON: JSON.stringify(sandbox) } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    daemon.stdout?.on('data', (d: Buffer) => out.push(d.toString('utf8')));
    daemon.stderr?.on('data', (d: Buffer) => out.push(d.toString('utf8')));
    const exited = new Promise<void>((resolve) => daemon!.once('exit', () => resolve()));
    const [doneA] = await Promise.all([
      emu.waitForSession(a.sessionId, { timeoutMs: 90_000 }),
      emu.waitForSession(b.sessionId, { timeoutMs: 90_000 }),
    ]);
    daemon.kill('SIGTERM');
    await exited;
    const texts = doneA.toolResults.map((r) => r.text);
    const lines = out.join('').split('\n');
    const metricsLine = lines.find((l) => l.startsWith('METRICS '));
    return {
      seen: { loopback: texts[0] ?? '', loopbackViaProxy: texts[1] ?? '', abstract: texts[2] ?? '' },
      events: lines.filter((l) => l.startsWith('EVENT ')).map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>),
      metrics: metricsLine ? (JSON.parse(metricsLine.slice(8)) as Record<string, number>) : undefined,
      sessionA: a.sessionId,
      daemonLog: out.join(''),
      loopbackHits,
      abstractHits,
    };
  } finally {
    if (daemon && daemon.exitCode === null) daemon.kill('SIGKILL');
    await emu.close();
    loopback.close();
    abstract.kill('SIGKILL');
    await fsp.rm(tmp, { recursive: true, force: true });
  }
}

describe("the host's network, tried from session A at concurrency 2", () => {
  it('with the default sandbox, A reaches neither a host loopback listener nor a host abstract socket', async () => {
    const run = await runAttack(undefined);
    expect(run.daemonLog).toContain('"network":"unrestricted"');
    expect(run.seen.loopback).not.toContain('host loopback ok');
    expect(run.seen.loopback).toMatch(/exit=7/);
    expect(run.seen.loopbackViaProxy).toMatch(/^HTTP\/1\.1 403 /);
    expect(run.seen.loopbackViaProxy).toContain('(rule: loopback)');
    expect(run.seen.abstract).not.toContain('host abstract ok');
    expect(run.seen.abstract).toMatch(/ConnectionRefusedError|No such file|Connection refused/);
    expect(run.loopbackHits).toBe(0);
    expect(run.abstractHits).toBe(0);
    // The refusal is an event, a metric and a log line with the session id, the host and the rule.
    expect(run.events).toEqual([expect.objectContaining({ sessionId: run.sessionA, host: '127.0.0.1', rule: 'loopback' })]);
    expect(run.metrics?.['egressRefused']).toBe(1);
    expect(run.daemonLog).toMatch(
      new RegExp(`"session_id":"${run.sessionA}".*"host":"127\\.0\\.0\\.1".*"rule":"loopback".*sandbox network connection refused`),
    );
  }, 150_000);

  it("with network: 'host', A reaches both (so the test above can fail), after a warning naming what it exposes", async () => {
    const run = await runAttack({ network: 'host' });
    expect(run.daemonLog).toContain("sandbox network 'host'");
    expect(run.daemonLog).toContain('169.254.169.254');
    expect(run.seen.loopback).toContain('host loopback ok');
    expect(run.seen.abstract).toContain('host abstract ok');
    expect(run.loopbackHits).toBeGreaterThanOrEqual(1);
    expect(run.abstractHits).toBe(1);
  }, 150_000);
});
