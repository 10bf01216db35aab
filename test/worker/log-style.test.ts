// Pins one field style in every log line, as the SDK's own lines: snake_case keys (work_id,
// session_id, environment_id, memory_store_id, duration_ms, …), one `component` key and never
// `scope`, no key twice in a line (pino's own `pid` included); an expected failure (a failed or
// refused poll) logs a short `error` without a stack at warn/error, with the stack at debug only, and
// an API error body appears once. Checked on the lines of a full session with two stores (mount,
// syncs, a conflict, a local delete, a refused read-only write, the final sync), a failed poll, a
// refused poll and a launcher that starts one sandbox.
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Launcher } from '../../src/launcher/index.js';
import { duplicateKeys, jsonKeys } from '../internal/log-keys.js';
import { harness, type Harness } from './helpers.js';

const SNAKE_CASE = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;
/** pino's error serializer owns the inside of `err` (type, message, stack and the error's own fields). */
const FREE_FORM = ['err'];

function styleProblems(raw: string): string[] {
  const problems: string[] = [];
  for (const dup of duplicateKeys(raw)) problems.push(`duplicate key ${dup}`);
  for (const { path: at, key } of jsonKeys(raw)) {
    if (FREE_FORM.some((f) => at === f || at.startsWith(`${f}.`))) continue;
    const where = at ? `${at}.${key}` : key;
    if (!SNAKE_CASE.test(key)) problems.push(`key ${where} is not snake_case`);
    if (key === 'scope') problems.push('key scope: use component');
  }
  return problems;
}

describe('log field style', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('writes snake_case keys, one component, no key twice and no stack for an expected failure', async () => {
    const { emu } = h;
    const prefs = await emu.createMemoryStore({ name: 'User Preferences', memories: { '/tone.md': 'brief', '/old.md': 'obsolete' } });
    const handbook = await emu.createMemoryStore({ name: 'Team Handbook', memories: { '/rules.md': 'be kind' } });
    const prefsDir = path.join(h.mountRoot, 'user-preferences');
    const handbookDir = path.join(h.mountRoot, 'team-handbook');
    const { sessionId, workId } = await emu.createSession({
      resources: [
        { memoryStoreId: prefs.id, access: 'read_write' },
        { memoryStoreId: handbook.id, access: 'read_only' },
      ],
      script: [
        { tool: 'edit', input: { file_path: path.join(prefsDir, 'tone.md'), old_string: 'brief', new_string: 'agent tone' } },
        { console: (e) => e.putMemory(prefs.id, '/tone.md', 'console tone') },
        { tool: 'bash', input: { command: `rm ${JSON.stringify(path.join(prefsDir, 'old.md'))}` } },
        { tool: 'write', input: { file_path: path.join(handbookDir, 'rules.md'), content: 'no rules' } },
        { tool: 'write', input: { file_path: path.join(prefsDir, 'new.md'), content: 'fresh' } },
      ],
    });
    // The first poll fails with a 503: backed off and retried.
    emu.faults.add({ route: /\/work\/poll$/, status: 503, shouldRetry: false, times: 1 });
    const worker = h.worker();
    const running = worker.run();
    await emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    await worker.close();
    await running;
    expect(emu.memories(prefs.id)['/tone.md']).toBe('console tone');

    // A poll refused for good (wrong key) ends run() with one error line.
    const refused = h.worker({ environmentKey: 'sk-ant-wrong-key' });
    await expect(refused.run()).rejects.toMatchObject({ status: 401 });

    // A launcher starting one sandbox that exits at once.
    const second = await emu.createSession({ script: [] });
    const launcher = new Launcher({
      client: h.client,
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      command: 'true',
      stdio: 'ignore',
      logger: h.capture.logger,
    });
    const exited = new Promise<void>((resolve) => launcher.on('exited', () => resolve()));
    const launching = launcher.run();
    await exited;
    await launcher.close();
    await launching;
    expect(second.workId).toBeDefined();

    const { raw, lines } = h.capture;
    // The lines cover the whole session: ids bound on the item's lines and on the store's.
    expect(lines.some((l) => l['work_id'] === workId && l['session_id'] === sessionId)).toBe(true);
    expect(lines.some((l) => l['memory_store_id'] === prefs.id)).toBe(true);
    expect(lines.some((l) => /conflict|store wins/i.test(l.msg))).toBe(true);
    expect(lines.some((l) => /sandbox launched/.test(l.msg))).toBe(true);

    const problems = new Set(
      raw.flatMap((line) => styleProblems(line).map((p) => `${p} in "${(JSON.parse(line) as { msg?: string }).msg}"`)),
    );
    expect([...problems]).toEqual([]);

    // The failed poll: a short warning without a stack; the stack only at debug.
    const failedPoll = raw.filter((l) => /poll failed/.test(l) && JSON.parse(l).level >= 40);
    expect(failedPoll).toHaveLength(1);
    expect(failedPoll[0]).not.toContain('"stack"');
    expect(failedPoll[0]!.length).toBeLessThan(700);
    expect(
      lines.some((l) => l.level === 20 && /poll failure, with its stack/.test(l.msg) && JSON.stringify(l['err']).includes('"stack"')),
    ).toBe(true);
    console.log(`failed poll: ${failedPoll[0]}`);
    // The refused poll: one line, the API's message once, no stack.
    const rejected = raw.filter((l) => /poll rejected/.test(l));
    expect(rejected).toHaveLength(1);
    expect(rejected[0]).not.toContain('"stack"');
    expect(rejected[0]!.split('the key is not one this server issued').length - 1).toBe(1);
    console.log(`refused poll: ${rejected[0]}`);
    // No warning or error anywhere carries a stack for these expected failures.
    const stacked = lines.filter((l) => l.level >= 40 && JSON.stringify(l).includes('"stack"'));
    expect(stacked.map((l) => l.msg)).toEqual([]);
  }, 60_000);
});
