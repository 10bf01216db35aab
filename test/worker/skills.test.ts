// Pins that the session agent's skills are set up with the SDK's `setupSkills` before
// any tool runs (a scripted `read` of `<tool workdir>/skills/<name>/SKILL.md` as the very first call
// returns its content) and cleaned up when the session ends; with `concurrency: 2` two sessions with
// the same skill each see it in their own workdir and one's cleanup never removes the other's copy;
// a skill download that fails is only logged (on the client's logger, as the official worker) and
// the session still runs and ends normally.
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Emulator, ScriptStep } from '../../src/testing/index.js';
import { exists, harness, waitFor, type Harness } from './helpers.js';

const SKILL_MD = '---\nname: pdf-tools\ndescription: Work with PDFs\n---\nRun scripts/extract.sh <file>.\n';

describe("the session agent's skills", () => {
  let h: Harness;
  let emu: Emulator;
  let skillId: string;
  beforeEach(async () => {
    h = await harness();
    emu = h.emu;
    ({ skillId } = emu.createSkill({ name: 'pdf-tools', files: { 'SKILL.md': SKILL_MD, 'scripts/extract.sh': 'pdftotext "$1" -\n' } }));
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('are in <workdir>/skills/<name> before the first tool call and gone once the session ended', async () => {
    const skillDir = path.join(h.workdir, 'skills', 'pdf-tools');
    const { sessionId } = await emu.createSession({
      skills: [{ skillId }],
      script: [
        { tool: 'read', input: { file_path: path.join(skillDir, 'SKILL.md') } },
        { tool: 'bash', input: { command: 'cat skills/pdf-tools/scripts/extract.sh' } },
      ],
    });
    const worker = h.worker();
    const running = worker.run();
    try {
      const done = await emu.waitForSession(sessionId, { timeoutMs: 15_000 });
      expect(done.toolResults.map((r) => [r.name, r.isError])).toEqual([
        ['read', false],
        ['bash', false],
      ]);
      expect(done.toolResults[0]!.text).toContain('Run scripts/extract.sh <file>.');
      expect(done.toolResults[1]!.text).toContain('pdftotext "$1" -');
      // The item is stopped only after teardown, so the folder is already gone here.
      expect(done.workStopped).toBe(true);
      expect(await exists(skillDir)).toBe(false);
      // Fetched with the item's sessions token, by the version the agent pins.
      const skillCalls = emu.requests.filter((r) => r.route.startsWith('GET /v1/skills/'));
      expect(skillCalls.map((r) => [r.route, r.status, r.credential])).toEqual([
        ['GET /v1/skills/:skillId/versions/:version', 200, 'sessions_token'],
        ['GET /v1/skills/:skillId/versions/:version/content', 200, 'sessions_token'],
      ]);
    } finally {
      await worker.close();
      await running;
    }
  });

  it("with concurrency 2, two sessions with the same skill each see it, and one's cleanup leaves the other's copy", async () => {
    // B reads the skill and ends; A reads it, then waits (in its script) until B's item is
    // stopped — B's cleanup has run — and reads it again.
    const b = await emu.createSession({
      skills: [{ skillId }],
      script: [{ tool: 'read', input: { file_path: 'skills/pdf-tools/SKILL.md' } }],
    });
    const a = await emu.createSession({
      skills: [{ skillId }],
      script: [
        { tool: 'read', input: { file_path: 'skills/pdf-tools/SKILL.md' } },
        { console: (e) => waitFor(() => e.workItem(b.sessionId).stopped, 15_000, `session B (${b.sessionId}) to end`) },
        { tool: 'read', input: { file_path: 'skills/pdf-tools/SKILL.md' } },
        { tool: 'bash', input: { command: 'pwd' } },
      ],
    });
    const worker = h.worker({ concurrency: 2 });
    const running = worker.run();
    try {
      const [doneA, doneB] = await Promise.all([a, b].map((s) => emu.waitForSession(s.sessionId, { timeoutMs: 20_000 })));
      expect(doneB!.toolResults.map((r) => [r.isError, r.text.includes('Run scripts/extract.sh')])).toEqual([[false, true]]);
      expect(doneA!.toolResults.map((r) => [r.name, r.isError])).toEqual([
        ['read', false],
        ['read', false],
        ['bash', false],
      ]);
      expect(doneA!.toolResults[0]!.text).toContain('Run scripts/extract.sh <file>.');
      expect(doneA!.toolResults[1]!.text).toContain('Run scripts/extract.sh <file>.');
      const dirA = path.join(h.workdir, 'sessions', a.sessionId);
      expect(doneA!.toolResults[2]!.text.trim()).toBe(await fsp.realpath(h.workdir).then((w) => path.join(w, 'sessions', a.sessionId)));
      // Both copies cleaned up; a session that left nothing of its own leaves no folder behind.
      expect(await exists(path.join(dirA, 'skills', 'pdf-tools'))).toBe(false);
      expect(await exists(path.join(h.workdir, 'sessions', b.sessionId, 'skills', 'pdf-tools'))).toBe(false);
      expect(await exists(dirA)).toBe(false);
      expect(await exists(path.join(h.workdir, 'sessions', b.sessionId))).toBe(false);
    } finally {
      await worker.close();
      await running;
    }
  });

  it('a failing skill download is only logged (client logger) and the session still runs', async () => {
    const warnings: Array<{ msg: string; args: unknown[] }> = [];
    const logger = {
      error: () => {},
      info: () => {},
      debug: () => {},
      warn: (msg: string, ...args: unknown[]) => warnings.push({ msg, args }),
    };
    const client = new Anthropic({ apiKey: 'sk-ant-api-operator-key', baseURL: emu.baseURL, logger, logLevel: 'warn', maxRetries: 0 });
    const fault = emu.faults.add({ route: /^GET \/v1\/skills\/[^/]+\/versions\/[^/]+\/content$/, status: 500 });
    const skillDir = path.join(h.workdir, 'skills', 'pdf-tools');
    const { sessionId } = await emu.createSession({
      skills: [{ skillId }],
      script: [
        { tool: 'read', input: { file_path: path.join(skillDir, 'SKILL.md') } },
        { tool: 'bash', input: { command: 'echo still-running' } },
      ],
    });
    const failed: unknown[] = [];
    const worker = h.worker({ client });
    worker.on('workFailed', (e) => failed.push(e));
    const running = worker.run();
    try {
      const done = await emu.waitForSession(sessionId, { timeoutMs: 15_000 });
      expect(fault.hits).toBeGreaterThanOrEqual(1);
      expect(done.toolResults.map((r) => [r.name, r.isError])).toEqual([
        ['read', true],
        ['bash', false],
      ]);
      expect(done.toolResults[1]!.text).toContain('still-running');
      expect(done.workStopped).toBe(true);
      expect(failed).toEqual([]);
      expect(warnings.some((w) => w.msg === 'failed to download skill' && JSON.stringify(w.args).includes(skillId))).toBe(true);
      expect(await exists(skillDir)).toBe(false);
    } finally {
      await worker.close();
      await running;
    }
  });

  describe('a symlink the agent leaves at skills/ is never followed', () => {
    /** A folder outside the workdir holding `pdf-tools/keep.md`: where the agent's link points. */
    async function victim(): Promise<string> {
      const dir = path.join(h.tmp, 'victim');
      await fsp.mkdir(path.join(dir, 'pdf-tools'), { recursive: true });
      await fsp.writeFile(path.join(dir, 'pdf-tools', 'keep.md'), 'not the worker to delete');
      return dir;
    }

    async function assertUntouched(dir: string): Promise<void> {
      expect(await fsp.readFile(path.join(dir, 'pdf-tools', 'keep.md'), 'utf8')).toBe('not the worker to delete');
      expect(await exists(path.join(dir, 'pdf-tools', 'SKILL.md'))).toBe(false);
    }

    async function serve(script: ScriptStep<Emulator>[]): Promise<void> {
      const { sessionId } = await emu.createSession({ skills: [{ skillId }], script });
      const worker = h.worker();
      const running = worker.run();
      try {
        const done = await emu.waitForSession(sessionId, { timeoutMs: 20_000 });
        expect(done.toolResults.map((r) => [r.name, r.isError])).toEqual(script.flatMap((s) => ('tool' in s ? [[s.tool, false]] : [])));
        expect(done.toolResults[0]!.text).toContain('Run scripts/extract.sh <file>.');
      } finally {
        await worker.close();
        await running;
      }
    }

    it('left by an earlier session: moved aside before the setup, which writes a plain folder', async () => {
      const dir = await victim();
      await fsp.symlink(dir, path.join(h.workdir, 'skills'));
      await serve([{ tool: 'read', input: { file_path: 'skills/pdf-tools/SKILL.md' } }]);
      await assertUntouched(dir);
      const aside = (await fsp.readdir(h.workdir)).filter((n) => n.startsWith('skills.moved-aside-'));
      expect(aside).toHaveLength(1);
      expect(await fsp.readlink(path.join(h.workdir, aside[0]!))).toBe(dir);
      const warning = h.capture.lines.find((l) => l.level === 40 && String(l.msg).includes('was a symlink before'));
      expect(warning).toMatchObject({ path: path.join(h.workdir, 'skills'), moved_to: path.join(h.workdir, aside[0]!) });
    });

    it('put there by the agent during the session: the cleanup does not remove through it', async () => {
      const dir = await victim();
      await serve([
        { tool: 'read', input: { file_path: 'skills/pdf-tools/SKILL.md' } },
        { tool: 'bash', input: { command: `mv skills skills.real && ln -s ${dir} skills && echo swapped` } },
      ]);
      await assertUntouched(dir);
      expect(h.capture.lines.some((l) => l.level === 40 && String(l.msg).includes('was a symlink before the session'))).toBe(true);
      // The real skills folder the agent moved is left where it put it.
      expect(await exists(path.join(h.workdir, 'skills.real', 'pdf-tools', 'SKILL.md'))).toBe(true);
    });
  });
});
