import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { createLogger } from '../internal/logger.js';
import { startEmulator } from '../testing/index.js';
import { EnvironmentWorker } from '../worker/environment-worker.js';
import { expectation, formatExpectations, formatSummaryTable, summaryRow, type Expectation, type StoreSummaryRow } from './summary.js';
import { emptyStoreTally, tallyWorkerEvents } from './tally.js';

/** The memories the demo starts with, and what the scripted agent and the "Console" write. */
export const DEMO = {
  syncIntervalMs: 5_000,
  prefs: {
    name: 'User Preferences',
    memories: {
      '/tone.md': 'Keep answers short and friendly.\n',
      '/format/code-style.md': 'Use 2-space indentation.\n',
      '/scratch.md': 'Temporary note; safe to delete.\n',
    },
  },
  handbook: {
    name: 'Company Handbook',
    memories: {
      '/policies/expenses.md': 'Expenses above 500 EUR need a manager approval.\n',
      '/welcome.md': 'Welcome to the team!\n',
    },
  },
  newNote: '# Meeting notes\nThe user prefers examples in TypeScript.\n',
  agentEdit: 'Use 4-space indentation.\n',
  consoleEdit: 'Use tabs for indentation (edited in the Console).\n',
} as const;

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
    });
    const t0 = performance.now();
    const stamp = (): string => `${((performance.now() - t0) / 1000).toFixed(1).padStart(5)}s`;
    const tally = tallyWorkerEvents(worker, (id) => names.get(id) ?? id, (text) => out(`${stamp()}  ${text}\n`));
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

    const refusedIn = (dir: string): number =>
      done.toolResults.filter((r) => r.isError && ['write', 'edit'].includes(r.name) && String((r.input as { file_path?: unknown }).file_path ?? '').startsWith(dir + '/')).length;
    const rowFor = (id: string, name: string, access: 'read_write' | 'read_only', dir: string): StoreSummaryRow => {
      const t = tally.stores.get(id);
      return summaryRow(name, access, t ?? emptyStoreTally(), {
        refusedToolCalls: refusedIn(dir),
        folderExists: existsSync(dir),
        session: tally.session,
      });
    };
    const rows = [rowFor(prefs.id, DEMO.prefs.name, 'read_write', prefsDir), rowFor(handbook.id, DEMO.handbook.name, 'read_only', handbookDir)];
    const [p, h] = rows as [StoreSummaryRow, StoreSummaryRow];
    const prefsFinal = emu.memories(prefs.id);
    const handbookFinal = emu.memories(handbook.id);

    const expectations: Expectation[] = [
      expectation('the session ran to its end and its work item was stopped', done.status === 'terminated' && done.workStopped, { status: done.status, workStopped: done.workStopped }),
      expectation('the worker reports the session completed', tally.outcomes.length === 1 && tally.outcomes[0]?.status === 'completed', tally.outcomes.map((o) => o.status)),
      expectation('User Preferences: every memory was downloaded at mount', p.downloaded >= Object.keys(DEMO.prefs.memories).length, p.downloaded),
      expectation("User Preferences: the agent's new note was uploaded", prefsFinal['/notes/meeting.md'] === DEMO.newNote && p.uploaded >= 1, { content: prefsFinal['/notes/meeting.md'], uploaded: p.uploaded }),
      expectation('User Preferences: the Console edit won the conflict with the agent edit', prefsFinal['/format/code-style.md'] === DEMO.consoleEdit && p.conflictsStoreWon >= 1, { content: prefsFinal['/format/code-style.md'], conflicts: p.conflictsStoreWon }),
      expectation('User Preferences: the deleted note is gone from the store', !('/scratch.md' in prefsFinal) && p.deletes >= 1, { paths: Object.keys(prefsFinal), deletes: p.deletes }),
      expectation('User Preferences: untouched memories are unchanged', prefsFinal['/tone.md'] === DEMO.prefs.memories['/tone.md'], prefsFinal['/tone.md']),
      expectation('Company Handbook: the write into the read-only store was refused', h.refusedWrites >= 1, h.refusedWrites),
      expectation('Company Handbook: the store is unchanged and nothing was uploaded', sameMemories(handbookFinal, DEMO.handbook.memories) && h.uploaded === 0, { memories: handbookFinal, uploaded: h.uploaded }),
      expectation('both stores were downloaded and their folders removed at the end', rows.every((r) => r.folderRemoved) && h.downloaded >= 2, rows.map((r) => ({ store: r.name, removed: r.folderRemoved }))),
      expectation('no final flush was cut off at its bound', [...tally.stores.values()].every((t) => t.flushCutOffs === 0), [...tally.stores.values()].map((t) => t.flushCutOffs)),
    ];
    const ok = expectations.every((e) => e.ok);
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

function sameMemories(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a).sort();
  const kb = Object.keys(b).sort();
  return ka.length === kb.length && ka.every((k, i) => k === kb[i] && a[k] === b[k]);
}
