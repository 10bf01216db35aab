// Pins parity with the official worker: the same scripted session (two stores, one read-only; a
// read, a new memory, agent edits, a Console edit conflicting with an agent edit, a local delete,
// a refused read-only write) run once by the SDK's EnvironmentWorker and once by ours, against
// separate emulators, leaves the same final store contents and the same tool results — in each of
// the three deletion modes. The agent also has a skill: both workers extract it to
// <workdir>/skills/<name> before the first tool call (which reads it) and remove it at the end.
import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { EnvironmentWorker as OfficialWorker } from '@anthropic-ai/sdk/lib/environments/worker';
import { afterEach, describe, expect, it } from 'vitest';
import type { MemoryDeleteMode } from '../../src/memory/rules/types.js';
import { exists, harness, type Harness } from './helpers.js';

type Which = 'official' | 'ours';

async function runScript(h: Harness, which: Which, deletions: MemoryDeleteMode) {
  const { emu } = h;
  const prefs = await emu.createMemoryStore({
    name: 'User Preferences',
    memories: { '/tone.md': 'brief', '/notes/todo.md': 'buy milk\n', '/old.md': 'obsolete' },
  });
  const handbook = await emu.createMemoryStore({ name: 'Team Handbook', memories: { '/rules.md': 'be kind' } });
  const prefsDir = path.join(h.mountRoot, 'user-preferences');
  const handbookDir = path.join(h.mountRoot, 'team-handbook');
  const { skillId } = emu.createSkill({
    name: 'house-style',
    files: { 'SKILL.md': 'Write in short sentences.\n', 'examples/a.md': 'Yes.' },
  });
  const skillDir = path.join(h.workdir, 'skills', 'house-style');
  const { sessionId } = await emu.createSession({
    skills: [{ skillId }],
    resources: [
      { memoryStoreId: prefs.id, access: 'read_write' },
      { memoryStoreId: handbook.id, access: 'read_only' },
    ],
    script: [
      { tool: 'read', input: { file_path: path.join(skillDir, 'SKILL.md') } },
      { tool: 'read', input: { file_path: path.join(prefsDir, 'tone.md') } },
      { tool: 'write', input: { file_path: path.join(prefsDir, 'ideas/new.md'), content: 'a fresh memory' } },
      { tool: 'edit', input: { file_path: path.join(prefsDir, 'notes/todo.md'), old_string: 'milk', new_string: 'oat milk' } },
      { tool: 'edit', input: { file_path: path.join(prefsDir, 'tone.md'), old_string: 'brief', new_string: 'agent tone' } },
      { console: (e) => e.putMemory(prefs.id, '/tone.md', 'console tone') },
      { tool: 'bash', input: { command: `rm ${JSON.stringify(path.join(prefsDir, 'old.md'))}` } },
      { tool: 'write', input: { file_path: path.join(handbookDir, 'rules.md'), content: 'no rules' } },
    ],
  });
  const stop = new AbortController();
  let running: Promise<void>;
  if (which === 'official') {
    const client = new Anthropic({ apiKey: 'sk-ant-api-operator-key', baseURL: emu.baseURL, logLevel: 'off' });
    const official = new OfficialWorker({
      client,
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      workdir: h.workdir,
      memorySyncIntervalMs: 5_000,
      memorySyncDeletions: deletions,
    });
    running = official.run(stop.signal);
  } else {
    running = h.worker({ memorySyncDeletions: deletions }).run(stop.signal);
  }
  try {
    const done = await emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    return {
      prefs: emu.memories(prefs.id),
      handbook: emu.memories(handbook.id),
      results: done.toolResults.map((r) => [r.name, r.isError]),
      skillRead: done.toolResults[0]!.text.includes('Write in short sentences.'),
      skillLeft: await exists(skillDir),
      workStopped: done.workStopped,
    };
  } finally {
    stop.abort();
    await running.catch(() => undefined);
  }
}

describe('parity with the official EnvironmentWorker', () => {
  const harnesses: Harness[] = [];
  afterEach(async () => {
    await Promise.all(harnesses.splice(0).map((h) => h.cleanup()));
  });

  const modes: Array<{ deletions: MemoryDeleteMode; oldKept: boolean }> = [
    { deletions: 'enabled', oldKept: false },
    { deletions: 'log_only', oldKept: true },
    { deletions: 'disabled', oldKept: true },
  ];
  for (const mode of modes) {
    it(`leaves the same store contents as the official worker with memorySyncDeletions: ${mode.deletions}`, async () => {
      const official = await harness();
      const ours = await harness();
      harnesses.push(official, ours);
      const a = await runScript(official, 'official', mode.deletions);
      const b = await runScript(ours, 'ours', mode.deletions);

      expect(b).toEqual(a);
      // And the contents are the ones the requirements call for, not merely equal.
      expect(b.prefs).toEqual({
        '/ideas/new.md': 'a fresh memory',
        '/notes/todo.md': 'buy oat milk\n',
        '/tone.md': 'console tone',
        ...(mode.oldKept ? { '/old.md': 'obsolete' } : {}),
      });
      expect(b.handbook).toEqual({ '/rules.md': 'be kind' });
      expect(b.results.at(-1)).toEqual(['write', true]);
      expect(b.results[0]).toEqual(['read', false]);
      expect([b.skillRead, b.skillLeft]).toEqual([true, false]);
      expect(b.workStopped).toBe(true);
    });
  }
});
