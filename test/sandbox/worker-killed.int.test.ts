// The worker killed with SIGKILL mid-session (no cleanup runs): its sessions' sandboxes die with it
// (bubblewrap's --die-with-parent, then the PID namespace), so nothing the agent started, a
// background writer included, goes on running or writing on the host.
import { execFileSync, spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { startEmulator } from '../../src/testing/index.js';

const DAEMON = fileURLToPath(new URL('./fixtures/tenant-daemon.mjs', import.meta.url));

async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

it('a worker killed with SIGKILL takes its sessions sandboxes and every process in them along', async () => {
  const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-killed-'));
  const mountRoot = path.join(tmp, 'mnt');
  const workdir = path.join(tmp, 'work');
  await fsp.mkdir(mountRoot);
  await fsp.mkdir(workdir);
  const emu = await startEmulator({ mountRoot, leaseTtlSeconds: 4 });
  const marker = `3141.${process.pid}`;
  const ticks = path.join(mountRoot, 'notes', 'ticks');
  // The session's copy of its store is a folder of its own in the state folder, bound at the mount path.
  const copies = path.join(tmp, 'state', 'session-stores');
  const onHost = async (): Promise<string | undefined> => {
    const found = await fsp.readdir(copies, { recursive: true, withFileTypes: true }).catch(() => []);
    const file = found.find((e) => e.isFile() && e.name === 'ticks');
    return file && path.join(file.parentPath, file.name);
  };
  let ticksOnHost = '';
  let daemon: ReturnType<typeof spawn> | undefined;
  try {
    const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'a' } });
    await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [
        {
          tool: 'bash',
          input: {
            command:
              `(while true; do date +%s%N >> ${ticks}; sleep 0.05; done) > /dev/null 2>&1 & ` +
              `setsid nohup sleep ${marker} > /dev/null 2>&1 & disown -a; echo started`,
          },
        },
        { sleepMs: 60_000 },
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
        TEST_SANDBOX: 'bwrap',
      },
      stdio: 'ignore',
    });
    const exited = new Promise<void>((resolve) => daemon!.once('exit', () => resolve()));
    const running = (): boolean => execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).includes(`sleep ${marker}`);
    await waitFor(running, 30_000, 'the agent to start its background processes');
    await waitFor(async () => (ticksOnHost = (await onHost()) ?? '') !== '', 10_000, 'the background writer');

    daemon.kill('SIGKILL');
    await exited;
    await waitFor(() => !running(), 5_000, 'the sandboxed processes to end with the worker');
    const size = (await fsp.stat(ticksOnHost)).size;
    await new Promise((r) => setTimeout(r, 500));
    expect((await fsp.stat(ticksOnHost)).size).toBe(size);
  } finally {
    if (daemon && daemon.exitCode === null && daemon.signalCode === null) daemon.kill('SIGKILL');
    await emu.close();
    await fsp.rm(tmp, { recursive: true, force: true });
  }
}, 60_000);
