/**
 * Conformance, second client: the official Python SDK's `EnvironmentWorker` (anthropic 1.13.0,
 * pinned, in a venv under node_modules/.cache) serves a full memory session against the emulator,
 * unchanged: it downloads two stores (one read-only), the agent writes, edits and deletes files, a
 * mid-session sync uploads them, a Console edit and an agent edit of the same memory meet (the
 * store wins), a write into the read-only store is refused, and the final sync sends the delete
 * before the folders are removed. Every response body the Python client received is validated
 * against the SDK's own response types in strict mode with extra fields forbidden
 * (`official_worker.py`); the test fails on any mismatch and names the field.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BetaManagedAgentsExecutionIdentity } from '@anthropic-ai/sdk/resources/beta/agents/agents';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { pythonWithOfficialSdk } from './python-venv.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MARKER = '.anthropic-memory-store';

interface Check {
  route: string;
  type: string;
  ok: boolean;
  errors?: Array<{ loc: string; type: string; msg: string }>;
  /** Fields newer than anthropic 1.13.0 (declared by the TypeScript SDK), with the value received. */
  newerFields?: Record<string, unknown>;
}

async function waitFor(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the official Python SDK EnvironmentWorker against the emulator', () => {
  let python: string;
  let tmp: string;
  let emu: Emulator;

  beforeAll(async () => {
    python = await pythonWithOfficialSdk();
  }, 300_000);

  beforeEach(async () => {
    tmp = mkdtempSync(path.join(tmpdir(), 'maw-py-conformance-'));
    mkdirSync(path.join(tmp, 'mnt'));
    mkdirSync(path.join(tmp, 'work'));
    emu = await startEmulator({ mountRoot: path.join(tmp, 'mnt'), leaseTtlSeconds: 4 });
  });

  afterEach(async () => {
    await emu.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('serves a full memory session; every response parses strictly as the SDK types', async () => {
    const prefs = await emu.createMemoryStore({
      name: 'User Preferences',
      memories: { '/tone.md': 'brief', '/notes/todo.md': 'buy milk\n', '/old.md': 'remove me' },
    });
    const handbook = await emu.createMemoryStore({ name: 'Team Handbook', memories: { '/rules.md': 'be kind' } });
    const prefsDir = path.join(tmp, 'mnt', 'user-preferences');
    const handbookDir = path.join(tmp, 'mnt', 'team-handbook');
    const read = (p: string): string | null => (existsSync(p) ? readFileSync(p, 'utf8') : null);
    const seen: Record<string, unknown> = {};

    const { sessionId, workId } = await emu.createSession({
      resources: [
        { memoryStoreId: prefs.id, access: 'read_write' },
        { memoryStoreId: handbook.id, access: 'read_only' },
      ],
      script: [
        {
          console: () => {
            seen['markers'] = [read(path.join(prefsDir, MARKER)), read(path.join(handbookDir, MARKER))];
            seen['downloaded'] = [
              read(path.join(prefsDir, 'tone.md')),
              read(path.join(prefsDir, 'notes/todo.md')),
              read(path.join(handbookDir, 'rules.md')),
            ];
          },
        },
        { tool: 'read', input: { file_path: path.join(prefsDir, 'tone.md') } },
        { tool: 'write', input: { file_path: path.join(prefsDir, 'ideas/new.md'), content: 'a fresh memory' } },
        { tool: 'edit', input: { file_path: path.join(prefsDir, 'notes/todo.md'), old_string: 'milk', new_string: 'oat milk' } },
        { tool: 'bash', input: { command: `rm ${JSON.stringify(path.join(prefsDir, 'old.md'))} && echo removed` } },
        { tool: 'write', input: { file_path: path.join(handbookDir, 'rules.md'), content: 'no rules' } },
        // Past the 5 s interval: the next tool call is followed by a mid-session sync.
        { sleepMs: 5_200 },
        { tool: 'read', input: { file_path: path.join(prefsDir, 'notes/todo.md') } },
        {
          console: async (e) => {
            // One sync uploads both, one request at a time: wait for the last of them.
            const uploaded = (): boolean =>
              e.memories(prefs.id)['/ideas/new.md'] !== undefined && e.memories(prefs.id)['/notes/todo.md'] === 'buy oat milk\n';
            await waitFor(uploaded, 10_000, 'the mid-session sync to upload /ideas/new.md and the edit of /notes/todo.md');
            seen['midSession'] = { ...e.memories(prefs.id) };
            seen['statusAtMidSync'] = e.session(sessionId).status;
          },
        },
        // A conflict: the agent edits tone.md while a Console edit of the same memory lands.
        { tool: 'edit', input: { file_path: path.join(prefsDir, 'tone.md'), old_string: 'brief', new_string: 'from the agent' } },
        { console: (e) => e.putMemory(prefs.id, '/tone.md', 'from the console') },
        { sleepMs: 5_200 },
        { tool: 'read', input: { file_path: path.join(prefsDir, 'ideas/new.md') } },
        {
          console: async () => {
            await waitFor(
              () => read(path.join(prefsDir, 'tone.md')) === 'from the console',
              10_000,
              'the store version of /tone.md to replace the local edit',
            );
            seen['toneAfterConflict'] = read(path.join(prefsDir, 'tone.md'));
          },
        },
      ],
    });

    const report = path.join(tmp, 'report.json');
    const child = spawn(python, [path.join(HERE, 'python', 'official_worker.py')], {
      env: {
        PATH: process.env['PATH'],
        HOME: process.env['HOME'],
        ANTHROPIC_BASE_URL: emu.baseURL,
        ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
        ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
        WORKDIR: path.join(tmp, 'work'),
        MEMORY_SYNC_INTERVAL: '5',
        REPORT: report,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const started = Date.now();
    let done;
    try {
      done = await emu.waitForSession(sessionId, { timeoutMs: 45_000 });
    } catch (e) {
      throw new Error(`${(e as Error).message}\npython worker output:\n${output}`);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
    const elapsedMs = Date.now() - started;
    const { anthropic, checks } = JSON.parse(readFileSync(report, 'utf8')) as { anthropic: string; checks: Check[] };
    expect(anthropic).toBe('1.13.0');

    // Strict parse: every response the client received matches the SDK's types exactly.
    const failed = checks.filter((c) => !c.ok);
    expect(failed, JSON.stringify(failed, null, 2)).toEqual([]);
    const types = new Set(checks.map((c) => c.type));
    for (const t of ['BetaSelfHostedWork', 'BetaManagedAgentsSession', 'BetaManagedAgentsMemory'])
      expect(types, [...types].join(', ')).toContain(t);
    expect(checks.some((c) => c.route.endsWith('/heartbeat'))).toBe(true);
    expect(checks.some((c) => c.route.endsWith('/events/stream'))).toBe(true);
    // The session agent's execution_identity is newer than the Python SDK: checked against the
    // TypeScript SDK's type instead (an object, service_account or aws_role; never null).
    const identities = checks.filter((c) => c.type === 'BetaManagedAgentsSession').map((c) => c.newerFields?.['agent.execution_identity']);
    expect(identities.length).toBeGreaterThan(0);
    for (const identity of identities) {
      const typed: BetaManagedAgentsExecutionIdentity = { type: 'service_account' };
      expect(identity).toEqual(typed);
    }

    // Download: both folders with their markers and contents before the first tool call.
    expect(seen['markers']).toEqual([`version 1\n${prefs.id}`, `version 1\n${handbook.id}`]);
    expect(seen['downloaded']).toEqual(['brief', 'buy milk\n', 'be kind']);

    // Every call ran once; the read-only write came back as a tool error.
    expect(done.status).toBe('terminated');
    expect(done.workStopped).toBe(true);
    expect(done.toolResults.map((r) => [r.name, r.isError])).toEqual([
      ['read', false],
      ['write', false],
      ['edit', false],
      ['bash', false],
      ['write', true],
      ['read', false],
      ['edit', false],
      ['read', false],
    ]);
    expect(done.toolResults[0]!.text).toContain('brief');
    expect(done.toolResults[4]!.text).toContain('read-only');

    // Mid-session sync: the new file and the edit reached the store while the session ran; the
    // delete waits (deletion delay) for the final sync.
    expect(seen['statusAtMidSync']).not.toBe('terminated');
    expect(seen['midSession']).toMatchObject({ '/ideas/new.md': 'a fresh memory', '/notes/todo.md': 'buy oat milk\n' });

    // Conflict: the store's version won, locally and in the store.
    expect(seen['toneAfterConflict']).toBe('from the console');

    // Final sync: the delete went out; nothing reached the read-only store; the folders are gone.
    expect(emu.memories(prefs.id)).toEqual({
      '/ideas/new.md': 'a fresh memory',
      '/notes/todo.md': 'buy oat milk\n',
      '/tone.md': 'from the console',
    });
    expect(emu.memories(handbook.id)).toEqual({ '/rules.md': 'be kind' });
    expect(emu.requests.filter((r) => r.path.startsWith(`/v1/memory_stores/${handbook.id}/memories`) && r.method !== 'GET')).toEqual([]);
    expect(emu.requests.some((r) => r.route === 'DELETE /v1/memory_stores/:id/memories/:memoryId' && r.status === 200)).toBe(true);
    expect(existsSync(prefsDir)).toBe(false);
    expect(existsSync(handbookDir)).toBe(false);
    expect(emu.workItem(workId).state).toBe('stopped');

    // Credentials: memory calls with the sessions token only, polls with the environment key only.
    expect(new Set(emu.requests.filter((r) => r.path.startsWith('/v1/memory_stores')).map((r) => r.credential))).toEqual(
      new Set(['sessions_token']),
    );
    expect(new Set(emu.requests.filter((r) => r.route.endsWith('/work/poll')).map((r) => r.credential))).toEqual(
      new Set(['environment_key']),
    );
    console.log(
      `python conformance session finished in ${elapsedMs} ms; ${checks.length} responses parsed strictly, as ${types.size} SDK types: ${[
        ...types,
      ]
        .map((t) => t.replace(/\[.*$/s, '[…]'))
        .sort()
        .join(', ')}`,
    );
  });
});
