/**
 * A test host in a network namespace the test makes: a veth pair with a /29 of the benchmarking
 * range (198.18.0.0/15) between the host and the namespace, and `fixtures/test-host.mjs` serving
 * HTTP and HTTPS on the namespace's side. The only route it adds is that /29, so no traffic
 * reaches any address outside the namespace. The sandbox's policy must allow the range
 * (`allowPrivate: ['198.18.0.0/15']`): the proxy refuses it by default as a non-public range.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const SERVER = fileURLToPath(new URL('./fixtures/test-host.mjs', import.meta.url));

export interface TestHost {
  /** The test host's address (inside its namespace). */
  address: string;
  /** A second address of the same test host (for a policy that lists only the first). */
  otherAddress: string;
  /** The host side of the veth pair: an address of the worker's own host. */
  hostSide: string;
  /** A bare git repository served over HTTP(S) at /repo.git, holding one commit with README.md. */
  repoPath: string;
  close(): Promise<void>;
}

function run(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

export interface TestHostOptions {
  /**
   * Shape what the test host sends (its side of the veth, inside its namespace) to this rate, in
   * tc's notation (`1gbit`): a token bucket standing in for a real link. Default: unshaped.
   */
  rate?: string;
}

export async function startTestHost(opts: TestHostOptions = {}): Promise<TestHost> {
  const id = `${process.pid % 10_000}${Math.floor(Math.random() * 100)}`;
  const ns = `maw-t-${id}`;
  const vh = `mawh${id}`;
  const vn = `mawn${id}`;
  const third = Number(id) % 250;
  const hostSide = `198.18.${third}.1`;
  const address = `198.18.${third}.2`;
  const otherAddress = `198.18.${third}.3`;
  const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-testhost-'));
  let server: ChildProcess | undefined;
  const cleanup = async (): Promise<void> => {
    server?.stdin?.end();
    server?.kill('SIGKILL');
    try {
      run('ip', ['link', 'del', vh]);
    } catch {
      // Gone with the namespace.
    }
    try {
      run('ip', ['netns', 'del', ns]);
    } catch {
      // Never made.
    }
    await fsp.rm(tmp, { recursive: true, force: true });
  };
  try {
    run('ip', ['netns', 'add', ns]);
    run('ip', ['link', 'add', vh, 'type', 'veth', 'peer', 'name', vn]);
    run('ip', ['link', 'set', vn, 'netns', ns]);
    run('ip', ['addr', 'add', `${hostSide}/29`, 'dev', vh]);
    run('ip', ['link', 'set', vh, 'up']);
    run('ip', ['netns', 'exec', ns, 'ip', 'addr', 'add', `${address}/29`, 'dev', vn]);
    run('ip', ['netns', 'exec', ns, 'ip', 'addr', 'add', `${otherAddress}/29`, 'dev', vn]);
    run('ip', ['netns', 'exec', ns, 'ip', 'link', 'set', vn, 'up']);
    run('ip', ['netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up']);
    if (opts.rate !== undefined) {
      // Only the namespace's own device: the bucket holds a few large (GSO) packets, and a packet
      // waits at most 50 ms for tokens before it is dropped.
      run('ip', [
        'netns',
        'exec',
        ns,
        'tc',
        'qdisc',
        'add',
        'dev',
        vn,
        'root',
        'tbf',
        'rate',
        opts.rate,
        'burst',
        '512kb',
        'latency',
        '50ms',
      ]);
    }
    // A repository to clone, served as plain files (git's dumb HTTP protocol).
    const src = path.join(tmp, 'src');
    await fsp.mkdir(src);
    const git = (cwd: string, ...args: string[]): string =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd, encoding: 'utf8' });
    git(tmp, 'init', '-q', src);
    await fsp.writeFile(path.join(src, 'README.md'), 'cloned through the proxy\n');
    git(src, 'add', 'README.md');
    git(src, 'commit', '-qm', 'one');
    const root = path.join(tmp, 'www');
    await fsp.mkdir(root);
    git(tmp, 'clone', '-q', '--bare', src, path.join(root, 'repo.git'));
    git(path.join(root, 'repo.git'), 'update-server-info');
    const cert = path.join(tmp, 'cert.pem');
    const key = path.join(tmp, 'key.pem');
    run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${address}`,
      '-addext',
      `subjectAltName=IP:${address},IP:${otherAddress}`,
      '-keyout',
      key,
      '-out',
      cert,
    ]);
    server = spawn('ip', ['netns', 'exec', ns, process.execPath, SERVER, '0.0.0.0', root, cert, key], { stdio: ['pipe', 'pipe', 'pipe'] });
    const child = server;
    await new Promise<void>((resolve, reject) => {
      let err = '';
      child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
      child.stdout?.on('data', (d: Buffer) => d.toString().includes('ready') && resolve());
      child.once('exit', (code) => reject(new Error(`the test host exited (${code}): ${err}`)));
    });
    return { address, otherAddress, hostSide, repoPath: '/repo.git', close: cleanup };
  } catch (e) {
    await cleanup();
    throw e;
  }
}
