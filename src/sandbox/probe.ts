import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { coerceError, type SandboxFailureReason } from '../errors.js';
import { findProgram, isExecutable } from '../internal/find-program.js';
import { bwrapFeatures } from './bwrap-features.js';
import { diagnoseSandboxFailure, readHostFacts, type SandboxHostFacts } from './diagnosis.js';
import { hostLayout, type HostLayout } from './host-layout.js';
import { EGRESS_LISTENER_PORT } from './network/session-egress.js';
import { resolveSandboxOption } from './options.js';
import type { SandboxKernelHardening, SandboxRuntime } from './runtime.js';
import { hostSeccompFilter, seccompArchOf } from './seccomp/filter.js';
import { SessionSandbox } from './session-sandbox.js';

/**
 * Whether a session's sandbox starts here, found by starting one: the worker's start check and
 * every `doctor` sandbox row run a {@link SessionSandbox} (the launcher, the wrapper and its
 * bounds, the seccomp filter, the tool host, the egress hand-over) and one `bash` call in it,
 * so a pass means a session's sandbox starts and runs its tools.
 */

/** What the probe's `bash` call saw from inside its sandbox. */
export interface SandboxReport {
  /** Node's name of this host's architecture. */
  arch: string;
  /** A seccomp filter is built for this architecture. */
  filterBuilt: boolean;
  /** The `Seccomp:` mode inside (2: a filter is installed); undefined when unreadable. */
  seccompMode: number | undefined;
  /** The sandbox's `/proc/self/uid_map`, its spaces squeezed. */
  uidMap: string;
  /** The sandbox's uid map differs from the worker's: it has a user namespace of its own. */
  ownUserNamespace: boolean;
  /** bubblewrap refused nested user namespaces (`--disable-userns`). */
  disableUserns: boolean;
  /** From inside, on a network of the sandbox's own: absent where the sandbox has the host's network. */
  network?: NetworkReport;
}

/** The sandbox's own network namespace, and its way out through the session's proxy. */
export interface NetworkReport {
  /** The host's loopback was out of reach from inside. */
  namespace: { ok: boolean; detail: string };
  /** The proxy answered inside and refused the host's loopback by its rule. */
  proxy: { ok: boolean; detail: string };
}

/** Whether a session's sandbox starts on this host; if not, why and how to fix it. */
export type SandboxProbe =
  | ({ ok: true; bwrap: string; layout: HostLayout; report: SandboxReport } & SandboxKernelHardening)
  | { ok: false; reason: SandboxFailureReason; problem: string; fix: string };

export interface ProbeOptions {
  bwrapPath?: string | undefined;
  platform?: string;
  /** The network the sessions get: `'own'` (default: a namespace of their own and the proxy) or `'host'`. */
  network?: 'own' | 'host';
  /** The host's facts the diagnosis weighs. Default: read. */
  facts?: SandboxHostFacts;
}

/** How to install bubblewrap, per distribution. */
export const BWRAP_INSTALL_FIX =
  'install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora/RHEL: dnf install bubblewrap; Alpine: apk add bubblewrap; ' +
  'Arch: pacman -S bubblewrap; in a container image, the same line in its Dockerfile)';

const probes = new Map<string, Promise<SandboxProbe>>();

/** Start one session sandbox and run one `bash` call in it. Cached per executable and network for the process. */
export function probeSandbox(opts: ProbeOptions = {}): Promise<SandboxProbe> {
  const platform = opts.platform ?? process.platform;
  const key = `${platform}\0${opts.bwrapPath ?? ''}\0${opts.network ?? 'own'}\0${opts.facts ? JSON.stringify(opts.facts) : ''}`;
  let probe = probes.get(key);
  if (!probe) {
    probe = runProbe(platform, opts);
    probes.set(key, probe);
  }
  return probe;
}

async function runProbe(platform: string, opts: ProbeOptions): Promise<SandboxProbe> {
  if (platform !== 'linux') {
    return {
      ok: false,
      reason: 'platform',
      problem: `bubblewrap sandboxes exist on Linux only; this host is ${platform}`,
      fix: "run the worker in a Linux VM or container to isolate sessions, or set sandbox: 'none' to say you accept tools running in the worker process",
    };
  }
  const bwrap = opts.bwrapPath ?? findProgram('bwrap');
  if (bwrap === undefined || !isExecutable(bwrap)) {
    return {
      ok: false,
      reason: 'missing',
      problem: `bubblewrap (bwrap) ${bwrap === undefined ? 'is not on PATH' : `at ${bwrap} is not executable`}`,
      fix: BWRAP_INSTALL_FIX,
    };
  }
  let layout: HostLayout;
  try {
    layout = hostLayout();
  } catch (e) {
    return { ok: false, reason: 'host_entry_missing', problem: coerceError(e).message, fix: 'build the package (npm run build)' };
  }
  const hardening: SandboxKernelHardening = {
    userNamespace: true,
    disableUserns: (await bwrapFeatures(bwrap)).disableUserns,
    seccomp: hostSeccompFilter(),
  };
  const runtime: Extract<SandboxRuntime, { kind: 'bwrap' }> = {
    kind: 'bwrap',
    bwrap,
    layout,
    options: resolveSandboxOption({ mode: 'bwrap', bwrapPath: bwrap, ...(opts.network === 'host' ? { network: 'host' } : {}) }),
    ...hardening,
  };
  const seen = await runInSessionSandbox(runtime);
  if ('problem' in seen) {
    return { ok: false, ...diagnoseSandboxFailure(seen.problem, opts.facts ?? readHostFacts()) };
  }
  return { ok: true, bwrap, layout, report: { ...seen.report, disableUserns: hardening.disableUserns }, ...hardening };
}

/** The probe's `bash` command: what its process sees of itself, then the network (`$1`: a port on the host's loopback). */
const INSIDE = [
  'while read -r k v _; do if [ "$k" = Seccomp: ]; then echo "seccomp=$v"; fi; done < /proc/self/status',
  'read -r a b c < /proc/self/uid_map; echo "uidmap=$a $b $c"',
  'port=$1',
  'if [ -n "$port" ]; then',
  '  if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then echo direct=reached; else echo direct=refused; fi',
  `  if exec 4<>/dev/tcp/127.0.0.1/${EGRESS_LISTENER_PORT}; then`,
  '    printf \'CONNECT 127.0.0.1:%s HTTP/1.1\\r\\nHost: 127.0.0.1:%s\\r\\n\\r\\n\' "$port" "$port" >&4',
  '    IFS= read -r -t 5 line <&4; echo "proxy=${line%$\'\\r\'}"',
  '    while IFS= read -r -t 5 line <&4; do line=${line%$\'\\r\'}; [ -z "$line" ] && break; case $line in [Xx]-[Ss]andbox-[Ee]gress-[Rr]ule:*) echo "rule=${line#*: }";; esac; done',
  '  else echo proxy=unreachable; fi',
  'fi',
].join('\n');

type Seen = { report: Omit<SandboxReport, 'disableUserns'> } | { problem: string };

/** Start a session's sandbox with `runtime`, run {@link INSIDE} in it with `bash`, and read what it printed. */
async function runInSessionSandbox(runtime: Extract<SandboxRuntime, { kind: 'bwrap' }>): Promise<Seen> {
  const workdir = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-sandbox-probe-'));
  const ownNetwork = runtime.options.network.type !== 'host';
  const listener = net.createServer((s) => s.destroy());
  const sandbox = new SessionSandbox(
    runtime,
    { workdir, allowedRoots: [], readOnlyRoots: [], maxFileBytes: undefined, hide: [], sessionId: 'probe', onEgressRefused: () => {} },
    pino({ level: 'silent' }),
  );
  try {
    const problem = await sandbox.started();
    if (problem !== undefined) return { problem };
    let port = '';
    if (ownNetwork) {
      await new Promise<void>((resolve, reject) => {
        listener.once('error', reject);
        listener.listen(0, '127.0.0.1', resolve);
      });
      port = String((listener.address() as net.AddressInfo).port);
    }
    const bash = sandbox.tools().find((t) => t.name === 'bash');
    if (bash === undefined) return { problem: 'the agent toolset has no bash tool' };
    let said: string;
    try {
      const out = await bash.run({ command: `set -- ${port}\n${INSIDE}` } as never, undefined as never);
      said = typeof out === 'string' ? out : JSON.stringify(out);
    } catch (e) {
      return { problem: `a bash call in the sandbox failed (${coerceError(e).message})` };
    }
    return { report: readReport(said, ownNetwork) };
  } finally {
    await sandbox.close();
    if (listener.listening) listener.close();
    await fsp.rm(workdir, { recursive: true, force: true });
  }
}

/** @internal What the probe's output says. Exported for its tests. */
export function readReport(said: string, ownNetwork: boolean): Omit<SandboxReport, 'disableUserns'> {
  const field = (name: string): string | undefined => new RegExp(`^${name}=(.*)$`, 'm').exec(said)?.[1]?.trim();
  const mode = field('seccomp');
  const uidMap = (field('uidmap') ?? '').replace(/\s+/g, ' ');
  const report: Omit<SandboxReport, 'disableUserns'> = {
    arch: process.arch,
    filterBuilt: seccompArchOf(process.arch) !== undefined,
    seccompMode: mode !== undefined && /^\d+$/.test(mode) ? Number(mode) : undefined,
    uidMap,
    ownUserNamespace: uidMap !== '' && uidMap !== workerUidMap(),
  };
  if (!ownNetwork) return report;
  const direct = field('direct');
  const proxy = field('proxy');
  const rule = field('rule');
  return {
    ...report,
    network: {
      namespace:
        direct === 'reached'
          ? { ok: false, detail: "the host's loopback was reachable from inside: the sandbox shares the host's network namespace" }
          : direct === 'refused'
            ? { ok: true, detail: "own network namespace; the host's loopback is out of reach" }
            : { ok: false, detail: `the probe did not report its network (${said.slice(0, 200)})` },
      proxy:
        rule === 'loopback'
          ? { ok: true, detail: `the egress proxy answers inside and refuses the host's loopback (${proxy ?? ''})` }
          : { ok: false, detail: `the egress proxy did not refuse the host's loopback from inside (${proxy ?? 'no answer'})` },
    },
  };
}

function workerUidMap(): string {
  try {
    return fs.readFileSync('/proc/self/uid_map', 'utf8').trim().replace(/\s+/g, ' ');
  } catch {
    return '';
  }
}
