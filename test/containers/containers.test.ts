/**
 * What an agent's `bash` gets when the worker runs in a real container runtime (podman with runc),
 * row by row of the security settings operators use: the runtime's defaults, the Kubernetes
 * manifest's (non-root, no capabilities, no new privileges), each with one restriction lifted,
 * Kubernetes with user namespaces and the repository's seccomp profile, and a seccomp profile
 * stricter than podman's that refuses namespaces as containerd's and Docker's do.
 *
 * In every row the worker (`sandbox` left at its default, `'auto'`) runs two sessions in one
 * container (`fixtures/scenario.mjs`, the package installed from its `npm pack` tarball as a user
 * installs it). Where no sandbox can start the worker must refuse to start, naming the reason and
 * the fix, before it acknowledges any work; where one can, A's agent reaches nothing of the worker
 * or of B. `explicit-none` shows the operator's explicit `sandbox: 'none'` still runs the tools in
 * the worker process. Each row also reports, without a cgroup, how many processes A's bash started
 * at once (of 300) and how many MiB of an 1100 MiB filler fit in its /tmp.
 *
 * Run: `npm run test:containers` (root, podman, runc, debootstrap, uidmap). Environment:
 * - `MAW_CONTAINER_PACKAGE_DIR`: the package folder to pack (default this checkout);
 * - `MAW_CONTAINER_CACHE`: root file systems and podman storage (default /var/tmp/maw-containers);
 * - `MAW_CONTAINER_USERNS_SECCOMP`: the seccomp profile of `k8s-userns-profile` instead of
 *   profiles/seccomp-bubblewrap.json (a path, or `unconfined` for a trial);
 * - `MAW_EXPECT_NPROC_BOUND`: the process bound `k8s-userns-profile` checks (default 1024, the
 *   default maxProcesses): its agent tries 100 processes more and must start fewer at once;
 * - `MAW_CONTAINER_RESULTS`: a file the rows' results are written to (JSON), e.g. for a table;
 * - `MAW_CONTAINER_ROWS`: the concurrency of rows (default 2);
 * - `MAW_CONTAINER_KEEP`: keep the installed app folder (its path is printed) to run a row by hand.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, inject, it, type ExpectStatic } from 'vitest';
import type { App } from './app.js';
import { runRow, type RowRun, type ScenarioResult } from './podman.js';
import { ensureShiftedRootfs, type Rootfs } from './rootfs.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
const REPO = fileURLToPath(new URL('../..', import.meta.url));
/** A row's whole container run; the scenario bounds itself at 90 s. */
const ROW_TIMEOUT_MS = 120_000;
/** Host uid of the container's uid 0 in the user-namespace row. */
const USERNS_OFFSET = 200_000;
/** The sandbox's process bound the user-namespace row checks: the default maxProcesses, or MAW_EXPECT_NPROC_BOUND. */
const NPROC_BOUND = Number(process.env['MAW_EXPECT_NPROC_BOUND'] ?? 1024);
/** The Kubernetes manifest's container settings (examples/kubernetes/poll-daemon.yaml). */
const K8S = ['--user', '10001:10001', '--cap-drop=all', '--security-opt', 'no-new-privileges'];

/**
 * The seccomp profile the repository ships for Kubernetes: as the installed package has it
 * (`node_modules/managed-agents-worker/profiles/`, where the refusal's fix points), else in the
 * packed tree, else in this checkout.
 */
function bubblewrapProfile(): string {
  const override = process.env['MAW_CONTAINER_USERNS_SECCOMP'];
  if (override) return override;
  const file = 'profiles/seccomp-bubblewrap.json';
  const candidates = [
    path.join(app.dir, 'node_modules/managed-agents-worker', file),
    path.join(app.packageDir, file),
    path.join(REPO, file),
  ];
  return candidates.find((p) => fs.existsSync(p)) ?? candidates[candidates.length - 1]!;
}

interface Row {
  name: string;
  /** What the row pins, as the test's name says it. */
  behaviour: string;
  flags: () => string[];
  scenarioArgs?: string[];
  /** The row maps the container's uids to host uids from USERNS_OFFSET: it runs the shifted copy of the root. */
  userns?: boolean;
  expectations: (expect: ExpectStatic, r: ScenarioResult) => void;
}

function refusedBeforeWork(expect: ExpectStatic, r: ScenarioResult, reason: string, mentions: string[]): void {
  expect(r.error, `the worker should refuse to start (${reason}); it reported ${JSON.stringify(r)}`).toBeDefined();
  expect(r.started).toBe(false);
  expect(r.error).toMatchObject({ code: 'MAW_SANDBOX', reason });
  for (const word of mentions) expect(r.error!.message).toContain(word);
  expect(r.workAcknowledged, 'no work item is acknowledged before the refusal').toBe(false);
}

function everyAttackBlocked(expect: ExpectStatic, r: ScenarioResult): void {
  expect(r.error, `the worker should start; it reported ${JSON.stringify(r.error)}`).toBeUndefined();
  expect(r.started).toBe(true);
  expect(r.attacks, JSON.stringify(r.outputs)).toMatchObject({
    tmpInWorker: false,
    secretSeen: false,
    otherSessionSeen: false,
    loopbackReached: false,
  });
}

const ROWS: Row[] = [
  {
    name: 'defaults',
    behaviour: 'the worker refuses to start (proc_masked), naming procMount and unmask, before any work is acknowledged',
    flags: () => [],
    expectations: (expect, r) => refusedBeforeWork(expect, r, 'proc_masked', ['procMount', 'unmask']),
  },
  {
    name: 'k8s-manifest',
    behaviour: 'the worker refuses to start (proc_masked), naming procMount and unmask, before any work is acknowledged',
    flags: () => K8S,
    expectations: (expect, r) => refusedBeforeWork(expect, r, 'proc_masked', ['procMount', 'unmask']),
  },
  {
    name: 'seccomp-unconfined',
    behaviour: 'the worker refuses to start (proc_masked): seccomp alone is not what stops bubblewrap',
    flags: () => [...K8S, '--security-opt', 'seccomp=unconfined'],
    expectations: (expect, r) => refusedBeforeWork(expect, r, 'proc_masked', ['procMount', 'unmask']),
  },
  {
    name: 'proc-unmasked',
    behaviour: "sessions run sandboxed: A's bash reaches neither the worker's /tmp, its secret, B's folders nor the loopback",
    flags: () => [...K8S, '--security-opt', 'seccomp=unconfined', '--security-opt', 'unmask=ALL'],
    expectations: everyAttackBlocked,
  },
  {
    name: 'privileged',
    behaviour: "sessions run sandboxed: A's bash reaches neither the worker's /tmp, its secret, B's folders nor the loopback",
    flags: () => ['--privileged'],
    expectations: everyAttackBlocked,
  },
  {
    name: 'k8s-userns-profile',
    behaviour: 'sessions run sandboxed under the shipped seccomp profile, every attack blocked and /tmp bounded at 1 GiB',
    userns: true,
    // No cgroup is the worker's here: maxProcesses (1024 by default) is held by RLIMIT_NPROC in each
    // sandbox's user namespace. A tries 100 processes more than it.
    scenarioArgs: [`forks=${NPROC_BOUND + 100}`],
    flags: () => [
      '--uidmap',
      `0:${USERNS_OFFSET}:65536`,
      '--gidmap',
      `0:${USERNS_OFFSET}:65536`,
      ...K8S,
      '--security-opt',
      'unmask=ALL',
      '--security-opt',
      `seccomp=${bubblewrapProfile()}`,
    ],
    expectations: (expect, r) => {
      everyAttackBlocked(expect, r);
      expect(r.attacks!.processesStarted).toBeLessThan(NPROC_BOUND);
      expect(r.attacks!.processesStarted).toBeGreaterThan(NPROC_BOUND / 2);
      expect(r.attacks!.tmpMiBWritten).toBeGreaterThan(0);
      expect(r.attacks!.tmpMiBWritten).toBeLessThanOrEqual(1024);
    },
  },
  {
    name: 'strict-seccomp',
    behaviour: 'the worker refuses to start (seccomp), naming seccompProfile, before any work is acknowledged',
    flags: () => [...K8S, '--security-opt', 'unmask=ALL', '--security-opt', `seccomp=${path.join(FIXTURES, 'seccomp-strict.json')}`],
    expectations: (expect, r) => refusedBeforeWork(expect, r, 'seccomp', ['seccompProfile']),
  },
  {
    name: 'explicit-none',
    behaviour: "sandbox: 'none' is the operator's choice: the worker starts and the agent gets the worker's /tmp",
    flags: () => [],
    scenarioArgs: ['sandbox=none'],
    expectations: (expect, r) => {
      expect(r.error, JSON.stringify(r.error)).toBeUndefined();
      expect(r.started).toBe(true);
      expect(r.attacks!.tmpInWorker).toBe(true);
    },
  },
];

let rootfs: Rootfs;
let shiftedRoot: string;
let app: App;
const secret = `maw-secret-${randomBytes(12).toString('hex')}`;
const results: Record<string, { seconds: number; result: ScenarioResult }> = {};

beforeAll(async () => {
  // Made once for every file of the suite (global-setup.ts).
  rootfs = inject('containerRootfs');
  app = inject('containerApp');
  shiftedRoot = await ensureShiftedRootfs(rootfs.dir, USERNS_OFFSET);
  const profile = bubblewrapProfile();
  if (profile !== 'unconfined' && !fs.existsSync(profile)) {
    console.warn(`containers: ${profile} does not exist; the k8s-userns-profile row will fail (MAW_CONTAINER_USERNS_SECCOMP overrides it)`);
  }
  console.log(
    `containers: root ${rootfs.dir} (${rootfs.debootstrapSeconds === null ? 'cached' : `debootstrap ${rootfs.debootstrapSeconds.toFixed(1)} s`}), ` +
      `app from ${app.packageDir} with @anthropic-ai/sdk ${app.sdkVersion} (${app.seconds.toFixed(1)} s), k8s-userns-profile seccomp ${profile}`,
  );
}, 900_000);

afterAll(async () => {
  const file = process.env['MAW_CONTAINER_RESULTS'];
  if (file) await fsp.writeFile(file, `${JSON.stringify(results, null, 2)}\n`);
});

describe.concurrent('the worker in a container, with the default sandbox option', () => {
  for (const row of ROWS) {
    it(
      `${row.name}: ${row.behaviour}`,
      async ({ expect }) => {
        const run: RowRun = await runRow({
          name: row.name,
          rootfs: row.userns ? shiftedRoot : rootfs.dir,
          app: app.dir,
          flags: row.flags(),
          scenarioArgs: row.scenarioArgs ?? [],
          secret,
          timeoutMs: ROW_TIMEOUT_MS,
        });
        results[row.name] = { seconds: run.seconds, result: run.result };
        const { started, error, attacks, sandboxed, warnings } = run.result;
        console.log(
          `containers: ${row.name} took ${run.seconds.toFixed(1)} s: ${JSON.stringify({ started, error, attacks, sandboxed, warnings })}`,
        );
        row.expectations(expect, run.result);
      },
      ROW_TIMEOUT_MS + 10_000,
    );
  }
});
