import { z } from 'zod/v3';
import {
  NETWORK_OPTION_EXPECTED,
  networkOptionSchema,
  resolveNetworkOption,
  type ResolvedNetwork,
  type SandboxNetworkOption,
} from './network/network-option.js';
import { runnerToolTimeoutMs } from './sdk-bounds.js';
import {
  resolveSandboxLimits,
  SANDBOX_LIMITS_EXPECTED,
  sandboxLimitsSchema,
  type ResolvedSandboxLimits,
  type SandboxLimits,
} from './limits/limits.js';

/**
 * How a session's tools are isolated.
 * - `'auto'` (default): a bubblewrap sandbox per session on Linux. Where none can start, a worker
 *   serving sessions from a queue refuses to start (`SandboxUnavailableError`, before any claim),
 *   and one serving a single session per process runs its tools in the worker process after a
 *   warning; off Linux (no bubblewrap), the tools run in the worker process after a warning.
 * - `'bwrap'`: the sandbox or nothing; the worker refuses to start without a working bubblewrap.
 * - `'none'`: the tools run in the worker process (chosen explicitly: no warning).
 */
export type SandboxMode = 'auto' | 'bwrap' | 'none';

/** `sandbox` as an object: the mode plus what the sandbox may see beyond its session's own folders. */
export interface SandboxSettings {
  /** `'auto'` (default) or `'bwrap'`, as for the string form of `sandbox`. */
  mode?: 'auto' | 'bwrap';
  /** Absolute paths made visible read-only, at the same path (a toolchain, a data set). Default: none. */
  readOnlyPaths?: string[];
  /** Absolute paths made visible read-write, at the same path (a shared cache). Default: none. */
  readWritePaths?: string[];
  /**
   * What the sandbox reaches on the network:
   * - `'unrestricted'` (default): public addresses, through the session's filtering egress proxy,
   *   which refuses loopback, link-local (the cloud metadata address), private and other non-public
   *   ranges and the worker host's own addresses; `{ type: 'unrestricted', allowPrivate }` lifts the
   *   refusal for the listed ranges (`10.0.0.0/8`) and host names (`git.internal`, `*.corp.example`).
   * - `{ type: 'limited', allowedHosts, allowPackageManagers, allowMcpServers, allowPrivate }`: the
   *   same proxy, reaching only the listed hosts (`api.example.com`, `*.example.com`, addresses;
   *   default none), the public package registries when `allowPackageManagers` (default false) and
   *   the hosts of the agent's MCP servers when `allowMcpServers` (default false).
   * - `'none'`: loopback only.
   * - `'host'`: the host's own network, unfiltered (warned about at start).
   */
  network?: SandboxNetworkOption;
  /**
   * Names of variables of the worker's environment passed into the sandbox, beside the built-in
   * allow-list (`PATH`, locale, `TZ`, `TERM`). `ANTHROPIC_*` names are refused. Default: none.
   */
  env?: string[];
  /**
   * Absolute paths that must never be visible, even inside a folder the sandbox sees (the CLI adds
   * its `--*-file` credential files). The worker's state folder is always hidden. Default: none.
   */
  hidePaths?: string[];
  /**
   * Milliseconds one tool call may take in the sandbox before the processes it started are killed
   * and it answers with an error (the session's shells, background jobs and `/tmp` stay). Default:
   * the installed SDK runner's own per-call bound (325 000 from 1.16, 120 000 before); 1 000..3 600 000.
   */
  toolTimeoutMs?: number;
  /** The bubblewrap executable. Default: `bwrap` found on `PATH`. */
  bwrapPath?: string;
  /**
   * What each session's sandbox may use of the host; a field left out takes its default, a field
   * set to `null` is unbounded, and `limits: null` leaves all unbounded. Each field is an integer:
   * - `memoryMiB`: MiB of memory (RAM and swap) all the sandbox's processes together may use, its
   *   `/tmp` and `/dev/shm` files included; needs a cgroup. Default 4096; 16..1 048 576.
   * - `maxProcesses`: processes and threads alive at once; needs a cgroup. Default 1024; 16..4 194 304.
   * - `cpuWeight`: CPU weight of the sandboxes against the worker's own 100 (cgroup v2 `cpu.weight`);
   *   needs a cgroup. Default 50; 1..10 000; `null`: no weight set.
   * - `tmpMiB`: MiB of each of `/tmp` and `/dev/shm`. Default 1024; 1..1 048 576; `null`: the
   *   kernel's tmpfs default (half of RAM).
   * - `openFiles`: open files per process (`ulimit -n`). Default 8192; 64..1 048 576; `null`: as inherited.
   */
  limits?: SandboxLimits | null;
}

/** The `sandbox` option of the worker, the webhook handler's worker and the CLI. */
export type SandboxOption = SandboxMode | SandboxSettings;

/** `sandbox` after validation and defaults. */
export interface ResolvedSandboxOptions {
  mode: SandboxMode;
  readOnlyPaths: string[];
  readWritePaths: string[];
  network: ResolvedNetwork;
  env: string[];
  hidePaths: string[];
  toolTimeoutMs: number;
  bwrapPath: string | undefined;
  limits: ResolvedSandboxLimits;
}

/** The default of `toolTimeoutMs`: the installed SDK runner's own per-call bound. */
export const SANDBOX_TOOL_TIMEOUT_DEFAULT_MS = runnerToolTimeoutMs();
const TOOL_TIMEOUT_MIN_MS = 1_000;
const TOOL_TIMEOUT_MAX_MS = 3_600_000;

const absolutePath = z.string().startsWith('/');
const passedName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
  .refine((name) => !name.toUpperCase().startsWith('ANTHROPIC_'), 'ANTHROPIC_* variables never enter a sandbox');

const settingsSchema = z
  .object({
    mode: z.enum(['auto', 'bwrap']).optional(),
    readOnlyPaths: z.array(absolutePath).optional(),
    readWritePaths: z.array(absolutePath).optional(),
    network: networkOptionSchema.optional(),
    env: z.array(passedName).optional(),
    hidePaths: z.array(absolutePath).optional(),
    toolTimeoutMs: z.number().int().min(TOOL_TIMEOUT_MIN_MS).max(TOOL_TIMEOUT_MAX_MS).optional(),
    bwrapPath: absolutePath.optional(),
    limits: sandboxLimitsSchema.optional(),
  })
  .strict();

/** The zod schema of the `sandbox` option, for the option schemas that carry it. */
export const sandboxOptionSchema = z.union([z.enum(['auto', 'bwrap', 'none']), settingsSchema]);

/** What `sandbox` accepts, as a validation message says it. */
export const SANDBOX_OPTION_EXPECTED =
  "'auto', 'bwrap', 'none' or { mode: 'auto' | 'bwrap', readOnlyPaths, readWritePaths, hidePaths (absolute paths), " +
  `network: ${NETWORK_OPTION_EXPECTED}, env (variable names, no ANTHROPIC_*), toolTimeoutMs (${TOOL_TIMEOUT_MIN_MS}..${TOOL_TIMEOUT_MAX_MS}), bwrapPath, ${SANDBOX_LIMITS_EXPECTED} }`;

/** Fill in the defaults of an already validated `sandbox` value. */
export function resolveSandboxOption(value: z.output<typeof sandboxOptionSchema> | undefined): ResolvedSandboxOptions {
  const settings: SandboxSettings = typeof value === 'string' ? (value === 'none' ? {} : { mode: value }) : (value ?? {});
  return {
    mode: value === 'none' ? 'none' : (settings.mode ?? 'auto'),
    readOnlyPaths: settings.readOnlyPaths ?? [],
    readWritePaths: settings.readWritePaths ?? [],
    network: resolveNetworkOption(settings.network),
    env: settings.env ?? [],
    hidePaths: settings.hidePaths ?? [],
    toolTimeoutMs: settings.toolTimeoutMs ?? SANDBOX_TOOL_TIMEOUT_DEFAULT_MS,
    bwrapPath: settings.bwrapPath,
    limits: resolveSandboxLimits(settings.limits),
  };
}
