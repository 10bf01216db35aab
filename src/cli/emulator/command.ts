import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { Option } from 'commander';
import { InternalError } from '../../errors.js';
import type { Emulator } from '../../testing/index.js';
import type { Command } from '../command.js';
import { COMMON_EXIT_ROWS, EXIT } from '../exit-codes.js';
import { intArg } from '../flags.js';
import type { CommandIo } from '../io.js';
import { handleShutdownSignals } from '../signals.js';
import { UsageError } from '../usage-error.js';
import { queueDemoSession, type DemoSession } from './demo-session.js';

/** Longest a queued demo session is watched for its end. */
const WATCH_SESSION_MS = 24 * 3_600_000;

export const emulatorCommand: Command = {
  name: 'emulator',
  summary: 'serve the embedded API emulator and print the variables to point a worker at it',
  description: `Serves the embedded emulator of the Managed Agents API (the one this package is tested against)
on 127.0.0.1 and prints the "export ANTHROPIC_..." lines that point "run", "handle" or your own
code at it, so any mode can be tried locally in two terminals. Each demo session mounts its own
memory store under the mount root (a fresh temp folder unless --mount-root is given), reads a
memory, writes one and ends; a line on stdout reports each session's end and the memories its
store then holds. Press Enter to queue another demo session. SIGINT/SIGTERM: stop the emulator
and exit 0.

With --claim, each demo item is claimed here as a launcher would, and the variables for
"managed-agents-worker handle" are printed instead (do not run "run" at the same time).`,
  exitCodes: [
    [EXIT.OK, 'stopped by SIGINT/SIGTERM'],
    COMMON_EXIT_ROWS.unexpected,
    [EXIT.USAGE, 'usage error: unknown flag, bad flag value, a --port in use, a --mount-root that is not a folder'],
    COMMON_EXIT_ROWS.secondSignal,
    COMMON_EXIT_ROWS.secondTerm,
  ],
  flags(cmd) {
    cmd
      .addOption(new Option('--port <n>', 'port to listen on (default: a free one)').argParser(intArg(0, 65_535)))
      .addOption(new Option('--latency-ms <ms>', 'delay added before every answer (default 0)').argParser(intArg(0, 60_000)))
      .option('--mount-root <dir>', 'folder the demo stores mount in; must exist (default: a fresh temp folder, removed at exit)')
      .addOption(new Option('--sessions <n>', 'demo sessions queued at start (default 1)').argParser(intArg(0, 100)))
      .option('--claim', 'claim each demo item here and print the variables for "handle"');
  },
  async run(flags, io) {
    const { startEmulator } = await import('../../testing/index.js');
    const ownRoot = flags['mountRoot'] === undefined;
    const mountRoot = ownRoot
      ? await fs.mkdtemp(path.join(os.tmpdir(), 'maw-emulator-'))
      : await existingFolder(path.resolve(io.cwd, flags['mountRoot'] as string));
    const port = flags['port'] as number | undefined;
    const latencyMs = flags['latencyMs'] as number | undefined;
    let emu: Emulator;
    try {
      emu = await startEmulator({ mountRoot, ...(port !== undefined ? { port } : {}), ...(latencyMs !== undefined ? { latencyMs } : {}) });
    } catch (e) {
      if (ownRoot) await fs.rm(mountRoot, { recursive: true, force: true });
      if ((e as NodeJS.ErrnoException).code === 'EADDRINUSE')
        throw new UsageError(`--port ${port}: already in use on 127.0.0.1; pick another port or leave --port out`);
      throw e;
    }
    const claim = flags['claim'] === true;
    io.stdout(banner(emu, mountRoot, claim));
    let queued = 0;
    const queue = async (): Promise<void> => {
      const session = await queueDemoSession(emu, mountRoot, ++queued);
      if (claim) await claimFor(emu, session, io);
      else io.stdout(`queued demo session ${session.sessionId} (work ${session.workId}), store mounted at ${session.mountPath}\n`);
      void reportEnd(emu, session, io);
    };
    for (let i = 0; i < ((flags['sessions'] as number | undefined) ?? 1); i++) await queue();

    const stdin = io.stdin ? readline.createInterface({ input: io.stdin() }) : undefined;
    stdin?.on('line', () => void queue().catch((e: unknown) => io.stdout(`could not queue a demo session: ${String(e)}\n`)));
    await new Promise<void>((resolve) => {
      const removeSignals = handleShutdownSignals(
        () => {
          removeSignals();
          resolve();
        },
        (code) => process.exit(code),
      );
    });
    stdin?.close();
    await emu.close();
    if (ownRoot) await fs.rm(mountRoot, { recursive: true, force: true });
    io.stdout('emulator stopped\n');
    return EXIT.OK;
  },
};

/** The mount root must exist: a worker creates each store's folder in it, never the root itself. */
async function existingFolder(dir: string): Promise<string> {
  const stat = await fs.stat(dir).catch(() => undefined);
  if (!stat?.isDirectory())
    throw new UsageError(`--mount-root ${dir}: not an existing folder; create it first (workers never create the parent of a mount)`);
  return dir;
}

function banner(emu: Emulator, mountRoot: string, claim: boolean): string {
  return `# managed-agents-worker emulator on ${emu.baseURL}; demo stores mount under ${mountRoot}
# Point "run", "handle" or your own code at it (paste into another terminal):
export ANTHROPIC_BASE_URL=${emu.baseURL}
export ANTHROPIC_ENVIRONMENT_ID=${emu.environmentId}
export ANTHROPIC_ENVIRONMENT_KEY=${emu.environmentKey}
# Set-up calls of your own code (create sessions, stores) take the console key: ${emu.apiKey}
# ${claim ? 'Then run the "handle" line printed for each item below.' : 'Then: managed-agents-worker run --workdir "$(mktemp -d)"'}
# Press Enter here to queue another demo session; Ctrl-C stops the emulator.
`;
}

/** Claim the session's item as a launcher would and print what `handle` needs to serve it. */
async function claimFor(emu: Emulator, session: DemoSession, io: CommandIo): Promise<void> {
  const { claimOne } = await import('../../webhook/drain-queue.js');
  const client = emu.client().withOptions({ apiKey: null, authToken: emu.environmentKey });
  const item = await claimOne(client, emu.environmentId, { workerId: 'managed-agents-worker-emulator' });
  if (!item) throw new InternalError(`the work item of demo session ${session.sessionId} was not queued`);
  io.stdout(
    `claimed work ${item.workId} of demo session ${item.sessionId}; serve it with:\n` +
      `ANTHROPIC_WORK_ID=${item.workId} ANTHROPIC_SESSION_ID=${item.sessionId} ANTHROPIC_WORK_SECRET=${item.secret ?? ''} managed-agents-worker handle --workdir "$(mktemp -d)"\n`,
  );
}

/** Print one line when the session has ended and its item is stopped. */
async function reportEnd(emu: Emulator, session: DemoSession, io: CommandIo): Promise<void> {
  try {
    const done = await emu.waitForSession(session.sessionId, { timeoutMs: WATCH_SESSION_MS });
    const memories = Object.keys(emu.memories(session.storeId)).sort().join(', ');
    io.stdout(
      `demo session ${session.sessionId} ended: ${done.status}, work ${done.workStopped ? 'stopped' : 'not stopped'}, ` +
        `${done.toolResults.length} tool results; its store now holds ${memories}\n`,
    );
  } catch {
    // The emulator closed first: nothing to report.
  }
}
