import { spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { bwrapArgs } from '../bwrap-args.js';
import type { HostLayout } from '../host-layout.js';
import { sandboxEnvironment } from '../tool-env.js';
import { EGRESS_SOCKET_IN_SANDBOX, SessionEgress } from './session-egress.js';

/** What the network probe found: the sandbox's own namespace, and its way out through the proxy. */
export interface NetworkProbe {
  /** A sandbox with a network namespace of its own started, and the host's loopback was out of its reach. */
  namespace: { ok: boolean; detail: string };
  /** From inside, the proxy's socket answered, and refused the host's loopback by its rule. */
  proxy: { ok: boolean; detail: string };
}

const PROBE_TIMEOUT_MS = 15_000;

/** Run inside: try the host's loopback listener directly, then ask the proxy for it; print what happened. */
const INSIDE = `
const net = require('node:net');
const [port, sock] = process.argv.slice(1);
const out = {};
const direct = net.connect({ host: '127.0.0.1', port: Number(port) });
direct.on('connect', () => { out.direct = 'reached'; direct.destroy(); viaProxy(); });
direct.on('error', (e) => { out.direct = e.code; viaProxy(); });
function viaProxy() {
  const s = net.connect(sock);
  let answer = '';
  s.on('connect', () => s.write('CONNECT 127.0.0.1:' + port + ' HTTP/1.1\\r\\n\\r\\n'));
  s.on('data', (d) => (answer += d));
  s.on('error', (e) => { out.proxy = 'error ' + e.code; done(); });
  s.on('close', () => { out.proxy = answer.split('\\r\\n')[0]; out.rule = (/X-Sandbox-Egress-Rule: (\\S+)/.exec(answer) || [])[1]; done(); });
}
function done() { if (!out.printed) { out.printed = true; process.stdout.write(JSON.stringify(out)); } }
`;

/**
 * Start one throw-away sandbox built as a session's is under the default network (its own
 * namespace, the proxy's socket bound in), with a listener on the host's loopback, and check from
 * inside that the listener is out of reach and that the proxy answers and refuses it.
 */
export async function probeNetwork(runtime: { bwrap: string; layout: HostLayout; userNamespace: boolean }): Promise<NetworkProbe> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-network-probe-'));
  const listener = net.createServer((s) => s.destroy());
  const egress = new SessionEgress({ type: 'unrestricted', allowPrivate: [] }, { onRefused: () => {} });
  try {
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    await egress.ready;
    const port = (listener.address() as net.AddressInfo).port;
    const args = bwrapArgs({
      system: runtime.layout.system,
      readOnly: runtime.layout.readOnly,
      workdir: dir,
      stores: [],
      readWrite: [],
      hide: [],
      network: 'none',
      egressSocket: { host: egress.socketPath, sandbox: EGRESS_SOCKET_IN_SANDBOX },
      userNamespace: runtime.userNamespace,
      env: sandboxEnvironment(process.env, [], dir),
      command: [runtime.layout.node, '-e', INSIDE, String(port), EGRESS_SOCKET_IN_SANDBOX],
    });
    const run = await runCapturing(runtime.bwrap, args);
    let seen: { direct?: string; proxy?: string; rule?: string } = {};
    try {
      seen = JSON.parse(run.stdout) as typeof seen;
    } catch {
      const why = `a sandbox with its own network namespace did not run (${run.problem ?? 'no answer'})`;
      return { namespace: { ok: false, detail: why }, proxy: { ok: false, detail: why } };
    }
    const namespace =
      seen.direct === 'reached'
        ? { ok: false, detail: "the host's loopback was reachable from inside: the sandbox shares the host's network namespace" }
        : { ok: true, detail: `own network namespace; the host's loopback is out of reach (${seen.direct ?? 'no answer'})` };
    const proxy =
      seen.rule === 'loopback'
        ? { ok: true, detail: `the egress proxy answers inside and refuses the host's loopback (${seen.proxy ?? ''})` }
        : { ok: false, detail: `the egress proxy did not refuse the host's loopback from inside (${seen.proxy ?? 'no answer'})` };
    return { namespace, proxy };
  } catch (e) {
    const why = `the network probe failed: ${(e as Error).message}`;
    return { namespace: { ok: false, detail: why }, proxy: { ok: false, detail: why } };
  } finally {
    listener.close();
    await egress.close();
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

function runCapturing(cmd: string, args: string[]): Promise<{ stdout: string; problem?: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: {} });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-1_000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), PROBE_TIMEOUT_MS);
    child.once('error', (e) => {
      clearTimeout(timer);
      resolve({ stdout, problem: e.message });
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve(code === 0 ? { stdout } : { stdout, problem: `exit code ${code}${stderr.trim() ? `: ${stderr.trim()}` : ''}` });
    });
  });
}
