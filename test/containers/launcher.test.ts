/**
 * One container per session, run for real: `managed-agents-worker launch --concurrency 2 --on-work
 * examples/sandbox-per-session/launch-container.sh` with podman (runc) serves the emulator's
 * sessions (fixtures/launcher-sessions.mjs). The suite's Debian root (`--rootfs DIR:O`, with the
 * packed app bound read-only at /opt/app and SANDBOX_HANDLE naming its `handle`) stands in for the
 * image of the Dockerfile, since no image registry is reachable here; the user and the writable
 * /workspace and /mnt/memory the image has are given as run flags; every other flag is the script's.
 *
 * A first launcher serves sessions 1 to 3 (each with a secret and a store) and is killed with
 * `kill -9` while sessions 2 and 3 run; a second one serves session 4 (no secret: its container gets
 * the environment key) and is stopped with SIGTERM while it runs.
 *
 * Network: the emulator runs inside a network namespace made by the test, holding only a loopback,
 * and the containers join it (`--network ns:...`), so a session reaches the API and nothing else,
 * not even the host's loopback. The launcher runs on the host, as an operator runs it, and reaches
 * the emulator through a unix-socket bridge on the same port of the host's loopback (netns.ts), so
 * the base URL it hands the containers is the one they reach. (podman started from inside such a
 * namespace fails: runc takes it for the host's and refuses the network sysctls podman sets.)
 *
 * Pinned: at most two containers run at once, and session 3 starts only once session 1's item is
 * stopped; each session's edit reaches its store; from inside each container the agent's bash finds
 * neither the environment key nor any session's secret or sessions token (its own included), nor
 * another session's files or ids (its environment, every process's environment and command line,
 * its mounts, /run/.containerenv, its host files, its writable folders), while it does find its own
 * session id and marker files (so a search that did not run fails); on the host no process's
 * command line, no podman or conmon environment and no `podman inspect` output holds a credential;
 * a killed or stopped launcher leaves its sessions to finish on their own (the stopped one exits 0
 * at once), each item delivered once and stopped by its `handle`; no container is left afterwards.
 * And a SIGTERM to the script's process group 50 ms after its start (podman still creating the
 * container) still leaves the container to start, run and be removed.
 *
 * Run: `npm run test:containers` (root, podman, runc, debootstrap, iproute2).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { App } from './app.js';
import { bridgeFromHost, createNetworkNamespace, LAUNCHER_NETNS_PREFIX, type NetworkNamespace } from './netns.js';
import { PODMAN_GLOBAL, podmanOutput, ULIMITS } from './podman.js';
import { AGENT_UID, type Rootfs } from './rootfs.js';

const SCRIPT = fileURLToPath(new URL('../../examples/sandbox-per-session/launch-container.sh', import.meta.url));
/** The whole run, from the launcher's start to the last session's end. */
const RUN_TIMEOUT_MS = 150_000;
const CONCURRENCY = 2;

interface SessionInfo {
  n: number;
  sessionId: string;
  workId: string;
  /** Sessions 1 to 3 have a store; session 4 none. */
  slug?: string;
  storeId?: string;
  mark: string;
  /** Session 4's item carries none. */
  secret: string | null;
  token: string | null;
}
interface Ready {
  baseURL: string;
  environmentId: string;
  environmentKey: string;
  sessions: SessionInfo[];
}
interface Done {
  n: number;
  status: string;
  workStopped: boolean;
  workState: string;
  deliveries: number;
  tools: { name: string; isError: boolean }[];
  search: string;
  memories: Record<string, string> | null;
  workLog: { workId: string; state: string; atMs: number }[];
}

/** The API side (fixtures/launcher-sessions.mjs) in the namespace: its JSON lines, and `killed` written to it. */
class SessionsProcess {
  readonly child: ChildProcess;
  readonly progress = new Map<number, number>();
  readonly ready: Promise<Ready>;
  readonly done: Promise<Done[]>;
  #stderr = '';

  constructor(netns: NetworkNamespace, script: string, args: string[]) {
    this.child = spawn(netns.exec[0]!, [...netns.exec.slice(1), process.execPath, script, ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => (this.#stderr += d));
    const lines = readline.createInterface({ input: this.child.stdout! });
    let resolveReady!: (r: Ready) => void;
    let resolveDone!: (d: Done[]) => void;
    let reject!: (e: Error) => void;
    const failed = new Promise<never>((_, rej) => (reject = rej));
    failed.catch(() => undefined);
    this.ready = Promise.race([new Promise<Ready>((r) => (resolveReady = r)), failed]);
    this.done = Promise.race([new Promise<Done[]>((r) => (resolveDone = r)), failed]);
    // Awaited later (or not at all when an earlier step fails): not an unhandled rejection meanwhile.
    this.ready.catch(() => undefined);
    this.done.catch(() => undefined);
    lines.on('line', (line) => {
      const msg = JSON.parse(line) as { ready?: Ready; progress?: { n: number; results: number }; done?: Done[]; error?: string };
      if (msg.ready) resolveReady(msg.ready);
      if (msg.progress) this.progress.set(msg.progress.n, msg.progress.results);
      if (msg.done) resolveDone(msg.done);
      if (msg.error) reject(new Error(`launcher-sessions: ${line}\nstderr: ${this.#stderr.slice(-2000)}`));
    });
    this.child.once('exit', (code) => reject(new Error(`launcher-sessions exited with ${code}\nstderr: ${this.#stderr.slice(-2000)}`)));
  }

  results(n: number): number {
    return this.progress.get(n) ?? 0;
  }

  tell(line: string): void {
    this.child.stdin!.write(`${line}\n`);
  }
}

/** What the host shows while the sessions run, sampled until stop(). */
class HostSampler {
  maxContainers = 0;
  samples = 0;
  readonly inspected = new Map<string, string>();
  /** Host processes whose command line held a credential: `pid: command line`. */
  readonly cmdlineHits: string[] = [];
  /** podman and conmon processes whose environment held a credential. */
  readonly environHits: string[] = [];
  podmanProcessesSeen = 0;
  #stopped = false;
  readonly #loop: Promise<void>;

  constructor(
    readonly prefix: string,
    readonly credentials: () => string[],
  ) {
    this.#loop = this.#run();
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      await this.sample().catch(() => undefined);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async sample(): Promise<void> {
    const secrets = this.credentials();
    const ids = (await podmanOutput(['ps', '--filter', `name=^${this.prefix}`, '--format', '{{.ID}}'])).split('\n').filter(Boolean);
    this.samples++;
    this.maxContainers = Math.max(this.maxContainers, ids.length);
    for (const id of ids) {
      if (!this.inspected.has(id)) this.inspected.set(id, await podmanOutput(['inspect', id]).catch(() => ''));
    }
    for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
      const read = (file: string): string => {
        try {
          return fs.readFileSync(`/proc/${pid}/${file}`, 'latin1');
        } catch {
          return '';
        }
      };
      const cmdline = read('cmdline');
      if (secrets.some((s) => cmdline.includes(s))) this.cmdlineHits.push(`${pid}: ${cmdline.replace(/\0/g, ' ')}`);
      const comm = read('comm').trim();
      if (comm === 'podman' || comm === 'conmon') {
        this.podmanProcessesSeen++;
        if (secrets.some((s) => read('environ').includes(s))) this.environHits.push(`${pid} (${comm})`);
      }
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
  }
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The section `== name` of a search output (up to the next `== ` line). */
function section(text: string, name: string): string {
  const start = text.indexOf(`== ${name}\n`);
  if (start < 0) return '';
  const rest = text.slice(start + name.length + 4);
  const end = rest.search(/^== /m);
  return end < 0 ? rest : rest.slice(0, end);
}

let rootfs: Rootfs;
let app: App;
let parent: string;
let netns: NetworkNamespace | undefined;
let sessionsProcess: SessionsProcess | undefined;
let launcher: ChildProcess | undefined;
let closeBridge: (() => void) | undefined;
const prefix = `maw-launch-${process.pid}-`;
const tag = randomBytes(4).toString('hex');

beforeAll(async () => {
  // Made once for every file of the suite (global-setup.ts); the app holds fixtures/launcher-sessions.mjs.
  rootfs = inject('containerRootfs');
  app = inject('containerApp');
  parent = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-launcher-'));
  netns = await createNetworkNamespace(`${LAUNCHER_NETNS_PREFIX}${process.pid}`);
});

afterAll(async () => {
  launcher?.kill('SIGKILL');
  sessionsProcess?.child.kill('SIGKILL');
  const left = (await podmanOutput(['ps', '-a', '--filter', `name=^${prefix}`, '--format', '{{.Names}}']).catch(() => ''))
    .split('\n')
    .filter(Boolean);
  if (left.length > 0) await podmanOutput(['rm', '-f', '-t', '0', ...left]).catch(() => undefined);
  closeBridge?.();
  await netns?.remove();
  if (parent) await fsp.rm(parent, { recursive: true, force: true });
});

describe('launch-container.sh under `launch`, with podman', () => {
  it(
    'serves each session in a container of its own: edits reach their stores, no credential or other session is visible inside or in inspect, a launcher killed (kill -9) or stopped (SIGTERM) leaves its sessions to finish, no container is left',
    async () => {
      const started = Date.now();
      const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1)} s`;
      const bridgeSocket = path.join(parent, 'api.sock');
      const bridge = await bridgeFromHost(bridgeSocket);
      closeBridge = bridge.close;
      sessionsProcess = new SessionsProcess(netns!, path.join(app.dir, 'launcher-sessions.mjs'), [
        `tag=${tag}`,
        `port=${bridge.port}`,
        `bridge=${bridgeSocket}`,
      ]);
      const sessions = sessionsProcess;
      const ready = await sessions.ready;
      const credentials = [ready.environmentKey, ...ready.sessions.flatMap((s) => [s.secret, s.token])].filter(
        (c): c is string => c !== null,
      );
      // Sessions 1 to 3 carry a secret (and so a sessions token); session 4 does not.
      expect(credentials).toHaveLength(7);
      expect(credentials.every((c) => c.length > 20)).toBe(true);

      const sandboxEnv = {
        SANDBOX_ENGINE: 'podman',
        SANDBOX_ENGINE_ARGS: PODMAN_GLOBAL().join(' '),
        SANDBOX_NAME_PREFIX: prefix,
        SANDBOX_IMAGE: `${rootfs.dir}:O`,
        SANDBOX_HANDLE: '/usr/local/bin/node /opt/app/node_modules/managed-agents-worker/dist/cli/main.js handle --workdir /workspace',
        // What the Dockerfile's image has and the root lacks: its user, its writable folders; then
        // the test's network and the app. `--rootfs` makes SANDBOX_IMAGE a root folder.
        SANDBOX_RUN_ARGS: [
          `--user ${AGENT_UID}:${AGENT_UID}`,
          '--tmpfs /workspace:rw,U,mode=0700,size=256m',
          '--tmpfs /mnt/memory:rw,U,mode=0700,size=64m',
          `--network ${netns!.podmanNetwork}`,
          ...ULIMITS,
          `-v ${app.dir}:/opt/app:ro`,
          '--rootfs',
        ].join(' '),
      };
      const logs: string[] = [];
      const logText = (): string => logs.map((f) => fs.readFileSync(f, 'utf8')).join('');
      /** `launch --concurrency 2` on the host, as an operator runs it (it reaches the API through the bridge). */
      const startLauncher = (): { child: ChildProcess; exit: Promise<NodeJS.Signals | number | null> } => {
        const file = path.join(parent, `launcher-${logs.length + 1}.log`);
        logs.push(file);
        const log = fs.openSync(file, 'w');
        const child = spawn(
          process.execPath,
          [
            path.join(app.dir, 'node_modules/managed-agents-worker/dist/cli/main.js'),
            'launch',
            '--concurrency',
            String(CONCURRENCY),
            '--on-work',
            SCRIPT,
            ...Object.keys(sandboxEnv).flatMap((name) => ['--pass-env', name]),
          ],
          {
            env: {
              PATH: process.env['PATH'],
              HOME: process.env['HOME'],
              ANTHROPIC_BASE_URL: ready.baseURL,
              ANTHROPIC_ENVIRONMENT_ID: ready.environmentId,
              ANTHROPIC_ENVIRONMENT_KEY: ready.environmentKey,
              MAW_LOG_LEVEL: 'info',
              ...sandboxEnv,
            },
            stdio: ['ignore', log, log],
          },
        );
        fs.closeSync(log);
        launcher = child;
        return { child, exit: new Promise((resolve) => child.once('exit', (c, sig) => resolve(sig ?? c))) };
      };
      const containers = async (all = false): Promise<string[]> =>
        (await podmanOutput(['ps', ...(all ? ['-a'] : []), '--filter', `name=^${prefix}`, '--format', '{{.Names}}']))
          .split('\n')
          .filter(Boolean);
      const waitOrExplain = (what: string, check: () => boolean | Promise<boolean>): Promise<void> =>
        waitFor(
          what,
          async () => {
            if (logText().includes('sandbox exited with a failure')) throw new Error('a sandbox exited with a failure');
            return check();
          },
          RUN_TIMEOUT_MS,
        ).catch((e: Error) => {
          throw new Error(`${e.message}\nlauncher logs:\n${logText().slice(-6000)}`);
        });
      const sampler = new HostSampler(prefix, () => credentials);

      try {
        // Sessions 1 and 2 run; 3 waits for a slot; once 1 has ended, 2 and 3 run and write their
        // files: kill the launcher under them.
        const first = startLauncher();
        await waitOrExplain('sessions 2 and 3 to write their files', () => sessions.results(2) >= 2 && sessions.results(3) >= 2);
        const runningAtKill = await containers();
        const killedAt = elapsed();
        first.child.kill('SIGKILL');
        expect(await first.exit).toBe('SIGKILL');
        sessions.tell('killed');
        console.log(`launcher: kill -9 at ${killedAt}, containers running then: ${runningAtKill.join(', ')}`);
        await waitOrExplain('sessions 2 and 3 to search and their containers to go', async () => {
          return sessions.results(2) >= 3 && sessions.results(3) >= 3 && (await containers(true)).length === 0;
        });
        console.log(`launcher: sessions 2 and 3 ended on their own and their containers are gone at ${elapsed()}`);

        // A second launcher serves session 4 (no secret: its container gets the environment key)
        // and is stopped with SIGTERM while it runs.
        const second = startLauncher();
        await waitOrExplain('session 4 to write its file', () => sessions.results(4) >= 1);
        const runningAtTerm = await containers();
        const termAt = Date.now();
        second.child.kill('SIGTERM');
        const secondExit = await second.exit;
        const termSeconds = (Date.now() - termAt) / 1000;
        const runningAfterTerm = await containers();
        sessions.tell('stopped');
        console.log(
          `launcher: SIGTERM to the second launcher at ${elapsed()}: it exited with ${secondExit} after ${termSeconds.toFixed(1)} s; ` +
            `containers before: ${runningAtTerm.join(', ')}; after: ${runningAfterTerm.join(', ')}`,
        );

        const done = await sessions.done.catch((e: Error) => {
          throw new Error(`${e.message}\nlauncher logs:\n${logText().slice(-6000)}`);
        });
        console.log(`launcher: all four sessions ended at ${elapsed()}`);
        // --rm: each container is removed once it exited, by podman's clean-up, also when the
        // client that started it was killed with its launcher's script.
        let left: string[] = [];
        await waitFor(
          'no container of this run',
          async () => {
            left = await containers(true);
            return left.length === 0;
          },
          30_000,
        ).catch(() => undefined);
        await sampler.stop();
        console.log(`launcher: containers left after the run: ${left.length}${left.length ? ` (${left.join(', ')})` : ''} at ${elapsed()}`);

        const inspectHits = [...sampler.inspected.values()].filter((j) => credentials.some((c) => j.includes(c))).length;
        console.log(
          `launcher: host: ${sampler.samples} samples, at most ${sampler.maxContainers} containers at once, ${sampler.inspected.size} containers inspected, ` +
            `${sampler.podmanProcessesSeen} podman/conmon process samples; credentials in inspect: ${inspectHits}, ` +
            `in command lines: ${sampler.cmdlineHits.length}, in podman/conmon environments: ${sampler.environHits.length}`,
        );
        expect(runningAtKill.length, 'two sessions ran when the launcher was killed').toBe(2);
        expect(runningAtTerm.length).toBe(1);
        expect(secondExit, 'the stopped launcher exits 0 at once').toBe(0);
        expect(runningAfterTerm, "session 4's container outlives its launcher").toEqual(runningAtTerm);
        expect(sampler.maxContainers, `containers at once (of ${sampler.samples} samples)`).toBeLessThanOrEqual(CONCURRENCY);
        expect(sampler.maxContainers).toBeGreaterThan(0);
        expect(logText()).toMatch(new RegExp(`"session_id":"${ready.sessions[3]!.sessionId}"[^\\n]*"environment_key_passed":true`));

        for (const s of ready.sessions) {
          const d = done.find((x) => x.n === s.n)!;
          const others = ready.sessions.filter((o) => o.n !== s.n);
          const ids = (o: SessionInfo): string[] => [o.sessionId, o.workId, o.mark, ...(o.slug ? [o.slug, o.storeId!] : [])];
          const search = d.search;
          const verdict = {
            // handle's environment (the tools' own has no ANTHROPIC_* variable) names its own session.
            ownId: section(search, 'environ').includes(`ANTHROPIC_SESSION_ID=${s.sessionId}`),
            ownMarks: (s.slug ? [`${s.mark}-workspace`, `${s.mark}-store.md`] : [`${s.mark}-workspace`]).every((m) =>
              section(search, 'marks').includes(m),
            ),
            credentialsFound: credentials.filter((c) => search.includes(c)).length,
            otherSessionsFound: others.filter((o) => ids(o).some((x) => search.includes(x))).length,
          };
          console.log(
            `launcher: session ${s.n} (${s.sessionId}): ${d.status}, item ${d.workState}, delivered ${d.deliveries}x, ` +
              `tools ${d.tools.map((t) => `${t.name}${t.isError ? '!' : ''}`).join(',')}, store ${JSON.stringify(d.memories)}, ` +
              `search ${search.length} chars: ${JSON.stringify(verdict)}`,
          );
          expect(d.status).toBe('terminated');
          expect(d.workStopped, `session ${s.n}'s item was stopped by its handle`).toBe(true);
          expect(d.deliveries, `session ${s.n}'s item was delivered once`).toBe(1);
          expect(d.tools.filter((t) => t.isError)).toEqual([]);
          if (s.slug) {
            expect(d.memories).toEqual({
              '/seed.md': `seed ${s.n}\n`,
              [`/edit-${s.n}.md`]: `edit ${s.n} of ${tag}\n`,
              [`/${s.mark}-store.md`]: `${s.n}\n`,
            });
            expect(section(search, 'folders')).toContain(s.slug);
          }
          // The search ran: it printed every section and found this session's own id and files.
          for (const name of ['env', 'environ', 'cmdline', 'mountinfo', 'containerenv', 'marks', 'folders', 'tokens', 'end']) {
            expect(search, `session ${s.n}'s search printed == ${name}`).toMatch(new RegExp(`^== ${name}$`, 'm'));
          }
          expect(verdict.ownId, search.slice(0, 3000)).toBe(true);
          expect(verdict.ownMarks, section(search, 'marks')).toBe(true);
          for (const c of credentials) expect(search.includes(c), `session ${s.n}'s container shows a credential`).toBe(false);
          for (const o of others) {
            for (const x of ids(o)) expect(search.includes(x), `session ${s.n}'s container shows ${x} of session ${o.n}`).toBe(false);
          }
        }
        // Session 3 was claimed only when session 1's container had exited (a slot was free).
        const stoppedAt = (n: number): number => done.find((x) => x.n === n)!.workLog.find((w) => w.state === 'stopped')?.atMs ?? Infinity;
        const firstActiveAt = (n: number): number => done.find((x) => x.n === n)!.workLog.find((w) => w.state !== 'queued')?.atMs ?? -1;
        expect(firstActiveAt(3)).toBeGreaterThanOrEqual(stoppedAt(1));

        expect(sampler.inspected.size).toBe(4);
        for (const [id, json] of sampler.inspected) {
          expect(json, `podman inspect ${id}`).toContain('ANTHROPIC_SESSION_ID=');
          for (const c of credentials) expect(json.includes(c), `podman inspect ${id} shows a credential`).toBe(false);
        }
        expect(sampler.cmdlineHits).toEqual([]);
        expect(sampler.environHits).toEqual([]);
        expect(left).toEqual([]);
      } finally {
        await sampler.stop();
      }
    },
    RUN_TIMEOUT_MS + 60_000,
  );

  it("a SIGTERM to the script's process group while the container is still being created leaves it to start, run and be removed", async () => {
    // A stand-in for handle: reads its credential from stdin, then runs 2 s.
    const handle = `/usr/local/bin/node -e require('fs').readFileSync(0);setTimeout(()=>{},2000) --`;
    const name = `${prefix}early-term`;
    const child = spawn(SCRIPT, [], {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env['PATH'],
        ANTHROPIC_WORK_ID: 'early-term',
        ANTHROPIC_ENVIRONMENT_ID: 'env_test',
        ANTHROPIC_SESSION_ID: 'sesn_test',
        ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
        ANTHROPIC_WORK_SECRET: 'not-a-real-secret',
        SANDBOX_ENGINE: 'podman',
        SANDBOX_ENGINE_ARGS: PODMAN_GLOBAL().join(' '),
        SANDBOX_NAME_PREFIX: prefix,
        SANDBOX_IMAGE: `${rootfs.dir}:O`,
        SANDBOX_HANDLE: handle,
        SANDBOX_RUN_ARGS: ['--network none', ...ULIMITS, '--rootfs'].join(' '),
      },
    });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    // As the launcher stops: SIGTERM to the script's whole process group, here 50 ms after its start.
    await new Promise((r) => setTimeout(r, 50));
    process.kill(-child.pid!, 'SIGTERM');
    expect(await exit, stderr).toBe(0);
    // podman 4's {{.State}} reads like its STATUS column ("Up 1 second ago", "Created", "Initialized").
    const states = async (): Promise<string[]> =>
      (await podmanOutput(['ps', '-a', '--filter', `name=^${name}$`, '--format', '{{.State}}'])).split('\n').filter(Boolean);
    const seen = new Set<string>();
    await waitFor(
      'the container to run',
      async () => {
        for (const state of await states()) seen.add(state.split(' ')[0]!);
        return seen.has('Up');
      },
      10_000,
    ).catch(() => undefined);
    let left: string[] = [];
    await waitFor('the container to be removed', async () => (left = await states()).length === 0, 15_000).catch(() => undefined);
    console.log(
      `launcher: early SIGTERM: script exited 0, container states seen ${JSON.stringify([...seen])}, left afterwards ${JSON.stringify(left)}`,
    );
    expect([...seen]).toContain('Up');
    expect(left).toEqual([]);
  }, 60_000);
});
