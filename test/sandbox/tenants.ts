/**
 * Two tenants on one shared poll daemon, as the README's first example runs it (the environment
 * key in the process environment, `concurrency: 2`), with tenant A's agent trying, with `bash`
 * only, everything a hostile agent would: reach tenant B's folder, the worker's credentials, the
 * state folder, a key file, and its own read-only store. The daemon is a real child process
 * (`fixtures/tenant-daemon.mjs`, on the built package); the emulator runs here.
 */
import { spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmulator } from '../../src/testing/index.js';

const DAEMON = fileURLToPath(new URL('./fixtures/tenant-daemon.mjs', import.meta.url));

/** What A's agent saw, per attempt: the output of each command, with its exit status appended. */
export interface TenantRun {
  seen: Record<'list' | 'readB' | 'writeB' | 'env' | 'procs' | 'state' | 'key' | 'writeReadOnly' | 'readReadOnly' | 'fd', string>;
  /** What reached the descriptor the daemon inherited without close-on-exec. */
  leakedPipe: string;
  /** B's store once both sessions ended. */
  storeB: Record<string, string>;
  /** The read-only store once both sessions ended. */
  storeReadOnly: Record<string, string>;
  environmentKey: string;
  daemonLog: string;
  daemonExit: number | null;
}

/** The daemon's inherited descriptor (no close-on-exec). */
const LEAKED_FD = 251;

const ATTEMPTS = ['list', 'readB', 'writeB', 'env', 'procs', 'state', 'key', 'writeReadOnly', 'readReadOnly', 'fd'] as const;

/** Run the scenario with `sandbox` left to its default (`undefined`) or set. */
export async function runTenants(sandbox: 'none' | 'bwrap' | undefined): Promise<TenantRun> {
  const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-tenants-'));
  const mountRoot = path.join(tmp, 'mnt');
  const workdir = path.join(tmp, 'work');
  const stateDir = path.join(tmp, 'state');
  const keyFile = path.join(tmp, 'keys', 'environment-key');
  for (const d of [mountRoot, workdir, path.dirname(keyFile)]) await fsp.mkdir(d, { recursive: true });
  const emu = await startEmulator({ mountRoot, leaseTtlSeconds: 4 });
  await fsp.writeFile(keyFile, emu.environmentKey, { mode: 0o600 });
  const daemonLog: string[] = [];
  let daemon: ReturnType<typeof spawn> | undefined;
  try {
    const storeA = await emu.createMemoryStore({ name: 'Tenant A', memories: { '/a.md': 'A' } });
    const storeB = await emu.createMemoryStore({ name: 'Tenant B', memories: { '/b.md': 'B original' } });
    const policy = await emu.createMemoryStore({ name: 'Shared Policy', memories: { '/policy.md': 'v1' } });
    const dirB = path.join(mountRoot, 'tenant-b');
    const dirPolicy = path.join(mountRoot, 'shared-policy');
    const sh = (command: string): { tool: string; input: { command: string } } => ({
      tool: 'bash',
      input: { command: `{ ${command}; } 2>&1; echo "exit=$?"` },
    });

    const b = await emu.createSession({
      resources: [{ memoryStoreId: storeB.id }],
      script: [{ tool: 'write', input: { file_path: path.join(dirB, 'b.md'), content: 'B final' } }, { sleepMs: 4_000 }, sh('true')],
    });
    const a = await emu.createSession({
      resources: [{ memoryStoreId: storeA.id }, { memoryStoreId: policy.id, access: 'read_only' }],
      script: [
        { sleepMs: 1_500 },
        sh(`ls ${mountRoot}`),
        sh(`cat ${dirB}/b.md`),
        sh(`echo 'A was here' > ${dirB}/b.md && echo WROTE`),
        sh(`env | grep ANTHROPIC_; cat /proc/[0-9]*/environ | tr '\\0' '\\n' | grep ANTHROPIC_ | sort -u`),
        // Only the daemon's script name is printed: a host's whole process list (a CI harness's long
        // command lines) passes the bash tool's output cut, and the bracket keeps this command's own
        // line from matching.
        sh(`cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -o 'tenant-[d]aemon[.a-z]*' | sort -u`),
        sh(`ls -a ${stateDir}`),
        sh(`cat ${keyFile}`),
        sh(`echo tampered > ${dirPolicy}/policy.md`),
        { console: (e) => e.putMemory(policy.id, '/policy.md', 'v2 from the Console') },
        { sleepMs: 5_500 },
        sh(`cat ${dirPolicy}/policy.md`),
        sh(`echo leaked >&${LEAKED_FD} && echo wrote`),
      ],
    });

    daemon = spawn(process.execPath, [DAEMON], {
      env: {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
        ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
        ANTHROPIC_BASE_URL: emu.baseURL,
        TEST_WORKDIR: workdir,
        TEST_STATE_DIR: stateDir,
        ...(sandbox ? { TEST_SANDBOX: sandbox } : {}),
      },
      // A descriptor the daemon inherits, as from a service manager or a test runner. Node marks
      // its low descriptors close-on-exec at start-up, not one this high.
      stdio: ['ignore', 'pipe', 'pipe', ...Array<'ignore'>(LEAKED_FD - 3).fill('ignore'), 'pipe'],
    });
    const leaked: string[] = [];
    (daemon.stdio as unknown as NodeJS.ReadableStream[])[LEAKED_FD]!.on('data', (d: Buffer) => leaked.push(d.toString('utf8')));
    daemon.stdout?.on('data', (d: Buffer) => daemonLog.push(d.toString('utf8')));
    daemon.stderr?.on('data', (d: Buffer) => daemonLog.push(d.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => daemon!.once('exit', (code) => resolve(code)));

    const [doneA] = await Promise.all([
      emu.waitForSession(a.sessionId, { timeoutMs: 90_000 }),
      emu.waitForSession(b.sessionId, { timeoutMs: 90_000 }),
    ]);
    daemon.kill('SIGTERM');
    const daemonExit = await exited;
    const texts = doneA.toolResults.map((r) => r.text);
    const seen = Object.fromEntries(ATTEMPTS.map((k, i) => [k, texts[i] ?? ''])) as TenantRun['seen'];
    return {
      seen,
      storeB: emu.memories(storeB.id),
      storeReadOnly: emu.memories(policy.id),
      environmentKey: emu.environmentKey,
      daemonLog: daemonLog.join(''),
      leakedPipe: leaked.join(''),
      daemonExit,
    };
  } finally {
    if (daemon && daemon.exitCode === null) daemon.kill('SIGKILL');
    await emu.close();
    await fsp.rm(tmp, { recursive: true, force: true });
  }
}
