import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { createLogger } from '../internal/logger.js';
import { startEmulator } from '../testing/index.js';
import { probeSandbox } from '../sandbox/probe.js';
import { EnvironmentWorker, type EnvironmentWorkerOptions } from '../worker/environment-worker.js';
import { DEMO } from './scenario.js';
import { formatExpectations, formatSummaryTable, type Expectation, type StoreSummaryRow } from './summary.js';
import { tallyWorkerEvents } from './tally.js';
import { demoVerdict } from './verdict.js';

export { DEMO } from './scenario.js';

export interface DemoResult {
  ok: boolean;
  mountRoot: string;
  rows: StoreSummaryRow[];
  expectations: Expectation[];
  durationMs: number;
}

export interface DemoOptions {
  /** Where the live log, the table and the verdict go (one call per chunk of text). */
  out: (text: string) => void;
  /** Keep the temp folder afterwards (it is removed by default). */
  keep?: boolean;
  /** Worker log level (stderr). Default `error`, so the live log stays readable. */
  logLevel?: pino.Level | 'silent';
  /** Where the agent's tools run. Default: the worker's default (`'auto'`). */
  sandbox?: EnvironmentWorkerOptions['sandbox'];
}

/**
 * The demo: an in-process emulator, two stores (a read-write one with a nested memory, a read-only
 * handbook), one session whose scripted agent reads, writes, edits while a Console edit lands,
 * tries to write into the handbook and deletes a note; our EnvironmentWorker serves it with a 5 s
 * sync interval. The verdict is computed from the stores' final contents and the worker's events.
 */
export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const started = performance.now();
  const out = options.out;
  const base = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-demo-'));
  const mountRoot = path.join(base, 'mnt-memory');
  const workdir = path.join(base, 'workdir');
  await fs.mkdir(mountRoot);
  await fs.mkdir(workdir);
  out(`mount root: ${mountRoot}\n`);

  const emu = await startEmulator({ mountRoot, latencyMs: 0 });
  const logger = createLogger({ level: options.logLevel ?? 'error' }, pino.destination({ fd: 2, sync: true }));
  let worker: EnvironmentWorker | undefined;
  try {
    const prefs = await emu.createMemoryStore({ name: DEMO.prefs.name, memories: { ...DEMO.prefs.memories } });
    const handbook = await emu.createMemoryStore({ name: DEMO.handbook.name, memories: { ...DEMO.handbook.memories } });
    const names = new Map([
      [prefs.id, DEMO.prefs.name],
      [handbook.id, DEMO.handbook.name],
    ]);
    const prefsDir = path.join(mountRoot, 'user-preferences');
    const handbookDir = path.join(mountRoot, 'company-handbook');

    // The demo's agent is a script of this package: where no sandbox starts, it still runs, with its
    // tools in this process, chosen here and said (a worker serving real sessions would refuse).
    let sandbox = options.sandbox;
    if (sandbox === undefined) {
      const probe = await probeSandbox();
      if (!probe.ok) {
        sandbox = 'none';
        out(
          `no sandbox starts here (${probe.reason}: ${probe.problem}); the demo runs its scripted agent's tools in this process. ` +
            `A worker serving real sessions would refuse to start. Fix: ${probe.fix}\n`,
        );
      }
    }
    worker = new EnvironmentWorker({
      client: emu.client(),
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      workdir,
      stateDir: path.join(base, 'state'),
      memorySyncIntervalMs: DEMO.syncIntervalMs,
      maxIdleMs: 5_000,
      finalFlushMs: 15_000,
      logger,
      ...(sandbox !== undefined ? { sandbox } : {}),
    });
    const t0 = performance.now();
    const stamp = (): string => `${((performance.now() - t0) / 1000).toFixed(1).padStart(5)}s`;
    const tally = tallyWorkerEvents(
      worker,
      (id) => names.get(id) ?? id,
      (text) => out(`${stamp()}  ${text}\n`),
    );
    // The item ends either way: a session that ran (sessionEnded) or an item that failed before it could.
    const ended = new Promise<void>((resolve) => {
      worker!.once('sessionEnded', () => resolve());
      worker!.once('workFailed', () => resolve());
    });
    const running = worker.run();

    const { sessionId } = await emu.createSession({
      resources: [
        { memoryStoreId: prefs.id, access: 'read_write' },
        { memoryStoreId: handbook.id, access: 'read_only' },
      ],
      script: [
        { tool: 'read', input: { file_path: `${prefsDir}/tone.md` } },
        { tool: 'write', input: { file_path: `${prefsDir}/notes/meeting.md`, content: DEMO.newNote } },
        { tool: 'edit', input: { file_path: `${prefsDir}/format/code-style.md`, old_string: '2-space', new_string: '4-space' } },
        { console: async () => emu.putMemory(prefs.id, '/format/code-style.md', DEMO.consoleEdit) },
        { sleepMs: DEMO.syncIntervalMs + 300 },
        { tool: 'write', input: { file_path: `${handbookDir}/policies/expenses.md`, content: 'No approval needed.\n' } },
        { tool: 'bash', input: { command: `rm '${prefsDir}/scratch.md'` } },
        { sleepMs: DEMO.syncIntervalMs + 300 },
        { tool: 'read', input: { file_path: `${prefsDir}/tone.md` } },
        { sleepMs: DEMO.syncIntervalMs + 300 },
        { tool: 'read', input: { file_path: `${prefsDir}/tone.md` } },
      ],
      end: 'terminate',
    });
    await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 50_000).unref())]);
    const done = await emu.waitForSession(sessionId, { timeoutMs: 10_000 }).catch((e: unknown) => {
      out(`${stamp()}  the session did not end: ${e instanceof Error ? e.message : String(e)}\n`);
      return { status: 'unfinished', workStopped: false, toolResults: [] as Array<{ name: string; input: unknown; isError: boolean }> };
    });
    await worker.close();
    await running;

    const { ok, rows, expectations } = demoVerdict({
      session: done,
      tally,
      prefs: { id: prefs.id, dir: prefsDir, memories: emu.memories(prefs.id), folderExists: existsSync(prefsDir) },
      handbook: { id: handbook.id, dir: handbookDir, memories: emu.memories(handbook.id), folderExists: existsSync(handbookDir) },
    });
    out('\n' + formatSummaryTable(rows) + '\n');
    out('checks:\n' + formatExpectations(expectations));
    const durationMs = performance.now() - started;
    out(`\n${ok ? 'demo passed' : 'demo FAILED'} in ${(durationMs / 1000).toFixed(1)} s\n`);
    return { ok, mountRoot, rows, expectations, durationMs };
  } finally {
    await worker?.close().catch(() => undefined);
    await emu.close();
    if (!options.keep) await fs.rm(base, { recursive: true, force: true });
  }
}
