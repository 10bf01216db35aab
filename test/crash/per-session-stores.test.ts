/**
 * A kill -9 while two sandboxed sessions of the same stores run side by side (a child worker at
 * `concurrency: 2`, real bubblewrap) loses nothing: each session's own copy of the read-write store
 * is left under the state folder with its journal entry, and `recover` uploads each copy's edit,
 * then removes the copies. Needs `npm run build` (the sandbox's tool host runs from dist/).
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { recoverLeftovers } from '../../src/memory/mount/recovery.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { SESSION_STORES_FOLDER } from '../../src/worker/store-placement.js';
import { WorkerChild } from './crash-harness.js';

let emu: Emulator;
let base: string;
let child: WorkerChild | undefined;

beforeAll(async () => {
  base = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-crash-shared-'));
  emu = await startEmulator({ mountRoot: path.join(base, 'mnt'), leaseTtlSeconds: 4 });
  for (const d of ['mnt', 'work']) await fsp.mkdir(path.join(base, d));
});

afterAll(async () => {
  await child?.kill();
  await emu?.close();
  if (base) await fsp.rm(base, { recursive: true, force: true });
});

/** Every regular file below `dir`, relative, with its content. */
function files(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out[path.relative(dir, path.join(e.parentPath, e.name))] = fs.readFileSync(path.join(e.parentPath, e.name), 'utf8');
  }
  return out;
}

it('two sessions of one store killed mid-run: recover uploads both copies and leaves nothing behind', async () => {
  const stateDir = path.join(base, 'state');
  const notes = await emu.createMemoryStore({ name: 'Notes', memories: { '/seed.md': 'seed' } });
  const handbook = await emu.createMemoryStore({ name: 'Handbook', memories: { '/policy.md': 'policy v1' } });
  const notesDir = path.join(base, 'mnt', 'notes');
  const resources = [{ memoryStoreId: notes.id }, { memoryStoreId: handbook.id, access: 'read_only' as const }];
  const sessions = [];
  for (const who of ['A', 'B']) {
    sessions.push(
      await emu.createSession({
        resources,
        script: [
          { tool: 'write', input: { file_path: path.join(notesDir, `from-${who}.md`), content: `crash-edit: from ${who}` } },
          { tool: 'bash', input: { command: 'sleep 60' } },
        ],
      }),
    );
  }
  child = new WorkerChild({
    CRASH_BASE_URL: emu.baseURL,
    CRASH_ENVIRONMENT_ID: emu.environmentId,
    CRASH_ENVIRONMENT_KEY: emu.environmentKey,
    CRASH_WORKDIR: path.join(base, 'work'),
    CRASH_STATE_DIR: stateDir,
    CRASH_CONCURRENCY: '2',
  });
  // Both edits answered, so both sessions run at once (each is in its 60 s call).
  const deadline = Date.now() + 90_000;
  while (!sessions.every((s) => emu.session(s.sessionId).toolResults.length >= 1)) {
    if (Date.now() > deadline) throw new Error(`the sessions did not both write; worker stderr:\n${child.stderr.slice(-2_000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  expect(sessions.every((s) => emu.session(s.sessionId).toolResults[0]!.isError === false)).toBe(true);
  await child.kill();

  // Each session's copy is there, with its own edit.
  const copies = path.join(stateDir, SESSION_STORES_FOLDER);
  const left = sessions.map((s) => files(path.join(copies, s.sessionId)));
  for (const [i, who] of ['A', 'B'].entries()) {
    expect(Object.values(left[i]!)).toContain(`crash-edit: from ${who}`);
    expect(Object.values(left[i]!)).not.toContain(`crash-edit: from ${who === 'A' ? 'B' : 'A'}`);
  }
  const before = emu.memories(notes.id);

  const lines = await recoverLeftovers({ client: emu.client(), stateDir, logger: pino({ level: 'silent' }) });

  const after = emu.memories(notes.id);
  expect(after).toEqual({ '/seed.md': 'seed', '/from-A.md': 'crash-edit: from A', '/from-B.md': 'crash-edit: from B' });
  // What was not uploaded before the kill, recover uploaded: one copy per session of the store.
  const missing = ['/from-A.md', '/from-B.md'].filter((p) => before[p] === undefined).length;
  const notesLines = lines.filter((l) => l.storeId === notes.id);
  expect(notesLines).toHaveLength(2);
  expect(notesLines.reduce((n, l) => n + l.uploaded, 0)).toBe(missing);
  expect(lines.every((l) => l.removed)).toBe(true);
  expect(emu.memories(handbook.id)).toEqual({ '/policy.md': 'policy v1' });
  // No copy left: every session's folder holds nothing.
  for (const s of sessions) expect(files(path.join(copies, s.sessionId))).toEqual({});
  // The agent's mount paths never existed on the host.
  expect(fs.readdirSync(path.join(base, 'mnt'))).toEqual([]);
}, 180_000);
