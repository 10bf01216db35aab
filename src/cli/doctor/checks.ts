/**
 * The host checks `managed-agents-worker doctor` runs. Pure decisions over {@link DoctorProbes}:
 * every fact about the host comes from a probe, so tests feed plain objects and the real run feeds
 * {@link realProbes}. Each result carries the fix an operator should apply.
 */
import type { SandboxFailureReason } from '../../errors.js';
import type { SandboxReport } from '../../sandbox/probe.js';

export type CheckStatus = 'pass' | 'warn' | 'fail' | 'skip';

export interface CheckResult {
  /** Stable short id, e.g. `mount_parent`. */
  id: string;
  title: string;
  status: CheckStatus;
  /** What was found. Never contains a credential. */
  detail: string;
  /** What to do about it; empty when nothing needs doing. */
  fix: string;
}

export type DirState = 'ok' | 'missing' | 'not_directory' | 'not_writable';

export type ApiProbeResult =
  { ok: true; latencyMs: number; serverDate: string | undefined } | { ok: false; status: number | undefined; message: string };

/** Everything doctor needs to know about the host, each behind a function a test can replace. */
export interface DoctorProbes {
  platform(): string;
  nodeVersion(): string;
  /** Opens a symlink with O_NOFOLLOW in a scratch folder: `ok` when the open is refused as it must be. */
  noFollow(): Promise<{ ok: boolean; detail: string }>;
  dirState(path: string): Promise<DirState>;
  /** `true` when names differing only by case are different files in `dir`; `undefined` when it cannot tell. */
  caseSensitive(dir: string): Promise<boolean | undefined>;
  isExecutable(path: string): Promise<boolean>;
  /** One authenticated read with the environment key. */
  api(input: {
    baseURL: string | undefined;
    environmentId: string;
    environmentKey: string;
    defaultHeaders?: Record<string, string> | undefined;
  }): Promise<ApiProbeResult>;
  /** Wall-clock now, ms since the epoch (for the clock-skew check). */
  nowMs(): number;
  /** Whether a per-session bubblewrap sandbox starts here: found, and a probe sandbox ran. */
  sandbox(): Promise<SandboxCheckInput>;
  /** What a probe sandbox saw of the kernel from inside: its seccomp mode, its user namespace. */
  sandboxKernel(): Promise<SandboxKernelCheckInput>;
  /** From inside a probe sandbox: its own network namespace, and the egress proxy. Absent: no rows. */
  network?(): Promise<NetworkCheckInput>;
  /** Which of the default sandbox limits this host enforces (a cgroup the worker may manage), without changing anything. */
  sandboxLimits(): Promise<SandboxLimitsCheckInput>;
}

/** What the limits probe found, for {@link checkSandboxLimits}. */
export interface SandboxLimitsCheckInput {
  /** The cgroup hierarchy the worker would use, or `none`. */
  cgroup: 'v1' | 'v2' | 'none';
  /** The limits enforced everywhere and those that need a cgroup and have one, as `name value`. */
  enforced: string[];
  /** The limits this host cannot enforce, as `name value`. */
  unenforced: string[];
  problem: string;
  fix: string;
}

/** What a session's sandbox saw of the kernel, for {@link checkUserNamespace} and {@link checkSeccomp}. */
export type SandboxKernelCheckInput = { ran: false; problem: string } | ({ ran: true } & Omit<SandboxReport, 'network'>);

/** What the network probe found, for {@link checkNetwork}; `undefined` when no sandbox starts here. */
export type NetworkCheckInput = { namespace: { ok: boolean; detail: string }; proxy: { ok: boolean; detail: string } } | undefined;

/** What the sandbox probe found, for {@link checkSandbox}. */
export type SandboxCheckInput = { ok: true; bwrap: string } | { ok: false; reason: SandboxFailureReason; problem: string; fix: string };

export interface DoctorInput {
  mountParent: string;
  environmentId: string | undefined;
  environmentKey: string | undefined;
  baseURL: string | undefined;
  /** Extra headers for the API check (from ANTHROPIC_CUSTOM_HEADERS). */
  defaultHeaders?: Record<string, string> | undefined;
  /** Skip the API check (no network). */
  offline: boolean;
}

/** Clock skew above which doctor warns: webhook signatures are refused beyond 5 minutes. */
export const CLOCK_SKEW_WARN_MS = 60_000;

export async function runChecks(probes: DoctorProbes, input: DoctorInput): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  results.push(checkPosix(probes.platform()));
  results.push(await checkNoFollow(probes));
  const parentState = await probes.dirState(input.mountParent);
  results.push(checkMountParent(input.mountParent, parentState));
  results.push(await checkCaseSensitivity(probes, input.mountParent, parentState));
  results.push(checkBash(await probes.isExecutable('/bin/bash')));
  results.push(checkSandbox(await probes.sandbox()));
  const kernel = await probes.sandboxKernel();
  results.push(checkUserNamespace(kernel), checkSeccomp(kernel));
  if (probes.network) results.push(...checkNetwork(await probes.network()));
  results.push(checkSandboxLimits(await probes.sandboxLimits()));
  results.push(checkNode(probes.nodeVersion()));
  results.push(checkEnv(input));
  const api = await checkApi(probes, input);
  results.push(...api);
  return results;
}

export function checkPosix(platform: string): CheckResult {
  const ok = platform !== 'win32';
  return {
    id: 'posix',
    title: 'POSIX host',
    status: ok ? 'pass' : 'fail',
    detail: `platform ${platform}`,
    fix: ok ? '' : 'Run the worker on Linux or macOS (WSL2, a Linux container or VM on Windows).',
  };
}

async function checkNoFollow(probes: DoctorProbes): Promise<CheckResult> {
  const r = await probes.noFollow();
  return {
    id: 'o_nofollow',
    title: 'O_NOFOLLOW refuses symlinks',
    status: r.ok ? 'pass' : 'fail',
    detail: r.detail,
    fix: r.ok ? '' : 'Use a Linux or macOS kernel and a filesystem with symlink support; memory files are opened with O_NOFOLLOW.',
  };
}

export function checkMountParent(path: string, state: DirState): CheckResult {
  const base = { id: 'mount_parent', title: 'mount parent exists and is writable' };
  const chown = `sudo mkdir -p ${path} && sudo chown "$(id -u):$(id -g)" ${path}`;
  switch (state) {
    case 'ok':
      return { ...base, status: 'pass', detail: `${path} is a writable directory`, fix: '' };
    case 'missing':
      return {
        ...base,
        status: 'fail',
        detail: `${path} does not exist (the worker creates each store folder inside it, never the parent itself)`,
        fix: `${chown}  (in a container: a writable volume at ${path})`,
      };
    case 'not_directory':
      return { ...base, status: 'fail', detail: `${path} exists but is not a directory`, fix: `Remove it and run: ${chown}` };
    case 'not_writable':
      return { ...base, status: 'fail', detail: `${path} is not writable by this user`, fix: chown };
    default: {
      const never: never = state;
      return never;
    }
  }
}

async function checkCaseSensitivity(probes: DoctorProbes, path: string, parentState: DirState): Promise<CheckResult> {
  const base = { id: 'case_sensitive', title: 'case-sensitive filesystem' };
  if (parentState !== 'ok') return { ...base, status: 'skip', detail: 'mount parent not usable', fix: '' };
  const sensitive = await probes.caseSensitive(path);
  if (sensitive === undefined) return { ...base, status: 'skip', detail: 'could not tell', fix: '' };
  return sensitive
    ? { ...base, status: 'pass', detail: `${path} is case-sensitive`, fix: '' }
    : {
        ...base,
        status: 'warn',
        detail: `${path} is case-insensitive: memories whose paths differ only by case cannot all be mounted (one is kept, the others are skipped with a warning)`,
        fix: 'Mount a case-sensitive volume at the mount parent (ext4/xfs, or an APFS case-sensitive volume on macOS).',
      };
}

export function checkBash(executable: boolean): CheckResult {
  return {
    id: 'bash',
    title: '/bin/bash for the bash tool',
    status: executable ? 'pass' : 'fail',
    detail: executable ? '/bin/bash is executable' : '/bin/bash is missing or not executable',
    fix: executable ? '' : 'Install bash (apt-get install bash, apk add bash); the agent toolset runs commands with /bin/bash.',
  };
}

/**
 * The session sandbox, started as a session's is (the launcher, the tool host, one `bash` call).
 * On Linux a failure: a worker with the default `sandbox: 'auto'` serving sessions from a queue
 * refuses to start without it. Off Linux a warning: there is no bubblewrap to install.
 */
export function checkSandbox(probe: SandboxCheckInput): CheckResult {
  const base = { id: 'sandbox', title: 'per-session tool sandbox (bubblewrap)' };
  if (probe.ok) return { ...base, status: 'pass', detail: `${probe.bwrap} found; a session's sandbox started and ran bash`, fix: '' };
  const found =
    probe.reason === 'missing'
      ? 'not found'
      : probe.reason === 'platform'
        ? 'not available on this platform'
        : 'found, but no sandbox starts';
  const consequence =
    probe.reason === 'platform'
      ? "sessions' tools would run in the worker process"
      : "`run`, the webhook handler and workers of concurrency above 1 refuse to start with sandbox 'auto'";
  return {
    ...base,
    status: probe.reason === 'platform' ? 'warn' : 'fail',
    detail: `bubblewrap ${found} (${probe.reason}): ${probe.problem}; ${consequence}`,
    fix: `${probe.fix.charAt(0).toUpperCase()}${probe.fix.slice(1)}; or choose sandbox: 'none' (--sandbox none) for trusted agents.`,
  };
}

/**
 * The sandbox's user namespace: every sandbox gets one (a root worker's too, so its agents' uid 0
 * holds no capability over the host), and nested ones are refused: by bubblewrap 0.8's
 * `--disable-userns`, and by the seccomp filter. Without the former, the filter alone holds.
 */
export function checkUserNamespace(probe: SandboxKernelCheckInput): CheckResult {
  const base = { id: 'user_namespace', title: 'sandbox user namespace, nested ones refused' };
  if (!probe.ran) return { ...base, status: 'skip', detail: `no probe sandbox: ${probe.problem}`, fix: '' };
  if (!probe.ownUserNamespace) {
    return {
      ...base,
      status: 'warn',
      detail: `the probe sandbox shares the worker's user namespace (uid map ${probe.uidMap})`,
      fix: 'Allow user namespaces (user.max_user_namespaces above 0; in a container, a seccomp profile that allows them).',
    };
  }
  const filter = probe.seccompMode === 2;
  if (!probe.disableUserns) {
    return {
      ...base,
      status: 'warn',
      detail:
        `own user namespace (uid map ${probe.uidMap}); bubblewrap has no --disable-userns (before 0.8), so ` +
        (filter ? 'only the seccomp filter refuses nested user namespaces' : 'nothing refuses nested user namespaces'),
      fix: 'Upgrade bubblewrap to 0.8 or later (Debian 12, Ubuntu 24.04, Fedora 38 and later ship it).',
    };
  }
  return {
    ...base,
    status: 'pass',
    detail: `own user namespace (uid map ${probe.uidMap}); nested ones refused by bubblewrap (--disable-userns)${filter ? ' and the seccomp filter' : ''}`,
    fix: '',
  };
}

/** The sandbox's seccomp filter, seen from inside a probe sandbox (`Seccomp: 2` in /proc/self/status). */
export function checkSeccomp(probe: SandboxKernelCheckInput): CheckResult {
  const base = { id: 'seccomp', title: 'sandbox seccomp filter' };
  if (!probe.ran) return { ...base, status: 'skip', detail: `no probe sandbox: ${probe.problem}`, fix: '' };
  if (!probe.filterBuilt) {
    return {
      ...base,
      status: 'warn',
      detail: `no filter is built for ${probe.arch} (x64 and arm64 only): io_uring, keyctl, ptrace and the mount API stay open to agents`,
      fix: 'Run the worker on x86_64 or aarch64 for the filter, or only run trusted agents on this host.',
    };
  }
  if (probe.seccompMode !== 2) {
    return {
      ...base,
      status: 'warn',
      detail: `the probe sandbox runs without a filter (Seccomp: ${probe.seccompMode ?? 'unreadable'})`,
      fix: 'Use a kernel built with CONFIG_SECCOMP_FILTER.',
    };
  }
  return { ...base, status: 'pass', detail: `applied in a probe sandbox (Seccomp: 2, ${probe.arch})`, fix: '' };
}

/**
 * The sandbox's network under the default policy: a namespace of its own (the host's loopback and
 * abstract sockets out of reach) and the egress proxy answering inside. Skipped without a sandbox.
 */
export function checkNetwork(probe: NetworkCheckInput): CheckResult[] {
  const ns = { id: 'sandbox_netns', title: "sandbox network namespace (host's loopback out of reach)" };
  const proxy = { id: 'sandbox_proxy', title: 'sandbox egress proxy (refuses loopback, private and host addresses)' };
  if (probe === undefined) {
    const skipped = { status: 'skip' as const, detail: 'no sandbox starts on this host', fix: '' };
    return [
      { ...ns, ...skipped },
      { ...proxy, ...skipped },
    ];
  }
  return [
    {
      ...ns,
      status: probe.namespace.ok ? 'pass' : 'fail',
      detail: probe.namespace.detail,
      fix: probe.namespace.ok
        ? ''
        : "Allow bubblewrap to create network namespaces (--unshare-net; in a container, a seccomp profile allowing unshare: see docs/containers.md), or set sandbox.network to 'host' knowing it exposes the host's network.",
    },
    {
      ...proxy,
      status: probe.proxy.ok ? 'pass' : 'fail',
      detail: probe.proxy.detail,
      fix: probe.proxy.ok
        ? ''
        : "Check that the sandbox's tool host can listen on its own loopback and hand that listener to the worker (the tool host's stderr, in the worker's log at debug, says why); or set sandbox.network to 'none' (no network) until fixed.",
    },
  ];
}

/** The sandboxes' resource limits: a warning naming each one this host cannot enforce, with the fix. */
export function checkSandboxLimits(probe: SandboxLimitsCheckInput): CheckResult {
  const base = { id: 'sandbox_limits', title: "sandboxes' resource limits" };
  const via = probe.cgroup === 'none' ? 'no cgroup' : `a cgroup ${probe.cgroup} per session`;
  if (probe.unenforced.length === 0) {
    return { ...base, status: 'pass', detail: `enforced (${via}): ${probe.enforced.join(', ')}`, fix: '' };
  }
  return {
    ...base,
    status: 'warn',
    detail: `not enforced: ${probe.unenforced.join(', ')} (${probe.problem}); enforced: ${probe.enforced.join(', ')}`,
    fix: `${probe.fix.charAt(0).toUpperCase()}${probe.fix.slice(1)}.`,
  };
}

export function checkNode(version: string): CheckResult {
  const major = Number(/^v?(\d+)/.exec(version)?.[1] ?? 0);
  const base = { id: 'node', title: 'Node.js version' };
  if (major < 20) {
    return { ...base, status: 'fail', detail: `Node ${version}; this library needs Node >= 20`, fix: 'Install Node 22 (or at least 20).' };
  }
  if (major < 22) {
    return {
      ...base,
      status: 'warn',
      detail: `Node ${version}: everything works except the SDK's glob tool, which needs Node 22 (fs.glob)`,
      fix: 'Install Node 22 if your agents use the glob tool.',
    };
  }
  return { ...base, status: 'pass', detail: `Node ${version}`, fix: '' };
}

export function checkEnv(input: Pick<DoctorInput, 'environmentId' | 'environmentKey'> & { offline?: boolean }): CheckResult {
  const missing = [
    input.environmentId ? undefined : 'ANTHROPIC_ENVIRONMENT_ID',
    input.environmentKey ? undefined : 'ANTHROPIC_ENVIRONMENT_KEY',
  ].filter((v): v is string => v !== undefined);
  if (missing.length > 0 && input.offline === true) {
    // Offline checks this host only; the credentials matter to the API checks it skips.
    return { id: 'env', title: 'environment id and key', status: 'skip', detail: `--offline (not set: ${missing.join(', ')})`, fix: '' };
  }
  return {
    id: 'env',
    title: 'environment id and key',
    status: missing.length === 0 ? 'pass' : 'fail',
    detail: missing.length === 0 ? 'ANTHROPIC_ENVIRONMENT_ID and ANTHROPIC_ENVIRONMENT_KEY are set' : `missing: ${missing.join(', ')}`,
    fix:
      missing.length === 0
        ? ''
        : 'Export them (or pass --environment-id / --environment-key-file); the key is shown once when you create it in the Console.',
  };
}

async function checkApi(probes: DoctorProbes, input: DoctorInput): Promise<CheckResult[]> {
  const base = { id: 'api', title: 'API reachable with the key' };
  const clockBase = { id: 'clock', title: 'clock in step with the API' };
  if (input.offline) {
    return [
      { ...base, status: 'skip', detail: '--offline', fix: '' },
      { ...clockBase, status: 'skip', detail: '--offline', fix: '' },
    ];
  }
  if (!input.environmentId || !input.environmentKey) {
    return [
      { ...base, status: 'skip', detail: 'no environment id or key', fix: '' },
      { ...clockBase, status: 'skip', detail: 'no environment id or key', fix: '' },
    ];
  }
  const r = await probes.api({
    baseURL: input.baseURL,
    environmentId: input.environmentId,
    environmentKey: input.environmentKey,
    defaultHeaders: input.defaultHeaders,
  });
  if (!r.ok) {
    return [
      { ...base, status: 'fail', detail: r.message, fix: apiFix(r.status) },
      { ...clockBase, status: 'skip', detail: 'API not reachable', fix: '' },
    ];
  }
  return [{ ...base, status: 'pass', detail: `answered in ${r.latencyMs} ms`, fix: '' }, checkClock(r.serverDate, probes.nowMs())];
}

export function apiFix(status: number | undefined): string {
  if (status === undefined) return 'Check ANTHROPIC_BASE_URL, DNS, proxy settings and outbound HTTPS from this host.';
  if (status === 401) return 'The environment key was refused: create a new key for this environment and export ANTHROPIC_ENVIRONMENT_KEY.';
  if (status === 403) return 'The key may not read this environment: check it belongs to ANTHROPIC_ENVIRONMENT_ID.';
  if (status === 404) return 'No such environment: check ANTHROPIC_ENVIRONMENT_ID (env_...) and that it is a self-hosted environment.';
  if (status >= 500) return 'The API had an error; retry in a minute.';
  return `The API answered ${status}; check the id, the key and ANTHROPIC_BASE_URL.`;
}

export function checkClock(serverDate: string | undefined, nowMs: number): CheckResult {
  const base = { id: 'clock', title: 'clock in step with the API' };
  const serverMs = serverDate ? Date.parse(serverDate) : NaN;
  if (Number.isNaN(serverMs)) return { ...base, status: 'skip', detail: 'the API sent no Date header', fix: '' };
  const skewMs = nowMs - serverMs;
  // The Date header has a one-second resolution, so a skew under a few seconds is noise.
  if (Math.abs(skewMs) > CLOCK_SKEW_WARN_MS) {
    return {
      ...base,
      status: 'warn',
      detail: `local clock is ${Math.round(skewMs / 1000)} s ${skewMs > 0 ? 'ahead of' : 'behind'} the API`,
      fix: 'Enable NTP (timedatectl set-ntp true); webhook signatures older than 5 minutes are refused.',
    };
  }
  return { ...base, status: 'pass', detail: `skew ${Math.round(skewMs / 1000)} s`, fix: '' };
}

/** Exit status of a doctor run: any `fail` fails it; warnings do not. */
export function allPassed(results: readonly CheckResult[]): boolean {
  return results.every((r) => r.status !== 'fail');
}
