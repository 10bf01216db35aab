// Pins who cleans a session's tool folder when the worker serves several sessions at once: runs of
// one session share `<workdir>/sessions/<session id>`, and only the last run out cleans its skills
// and removes it (when empty). A session's item can come back while its previous run is still
// tearing down, so the first run to end must leave the folder and the skills the second one uses.
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type { AgentToolContext } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sessionWorkdir, ToolFolder, type SessionFolderCounts } from '../../src/worker/tool-folder.js';
import { exists } from './helpers.js';

const log = pino({ level: 'silent' });

/** The skills setup reads only the folder here (the setup is the test's own). */
function toolContext(workdir: string): AgentToolContext {
  return { workdir } as AgentToolContext;
}
const ids = { workId: 'work_1', sessionId: 'sesn_1' };

describe('a session tool folder', () => {
  let workdir: string;
  beforeEach(async () => {
    workdir = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-tool-folder-'));
  });
  afterEach(async () => {
    await fsp.rm(workdir, { recursive: true, force: true });
  });

  /** Sets up a skill as the SDK does: writes `skills/<name>/SKILL.md`; its cleanup removes `skills/<name>` only. */
  async function setUpSkill(folder: ToolFolder, cleanups: string[]): Promise<void> {
    const dir = folder.path;
    await folder.setUpSkills(toolContext(dir), log, async () => {
      const skill = path.join(dir, 'skills', 'pdf');
      await fsp.mkdir(skill, { recursive: true });
      await fsp.writeFile(path.join(skill, 'SKILL.md'), 'skill');
      return async () => {
        cleanups.push(dir);
        await fsp.rm(skill, { recursive: true, force: true });
      };
    });
  }

  describe('when two runs of the same session overlap', () => {
    it('the first run out leaves the folder and its skills to the second; the last run out removes them', async () => {
      const counts: SessionFolderCounts = new Map();
      const cleanups: string[] = [];
      const first = ToolFolder.enter(counts, workdir, ids.sessionId);
      await first.create(ids, log);
      await setUpSkill(first, cleanups);
      const second = ToolFolder.enter(counts, workdir, ids.sessionId);
      await second.create({ ...ids, workId: 'work_2' }, log);
      await setUpSkill(second, cleanups);
      expect(second.path).toBe(first.path);

      await first.leave(log);
      expect(cleanups).toEqual([]);
      expect(await exists(path.join(second.path, 'skills', 'pdf', 'SKILL.md'))).toBe(true);
      expect(counts.get(first.path)).toBe(1);

      await second.leave(log);
      expect(cleanups).toEqual([second.path]);
      expect(await exists(second.path)).toBe(false);
      expect(counts.size).toBe(0);
    });

    it('keeps the folder when the last run out leaves a file in it, for a later turn', async () => {
      const counts: SessionFolderCounts = new Map();
      const first = ToolFolder.enter(counts, workdir, ids.sessionId);
      const second = ToolFolder.enter(counts, workdir, ids.sessionId);
      await first.create(ids, log);
      await fsp.writeFile(path.join(first.path, 'notes.txt'), 'kept');
      await first.leave(log);
      await second.leave(log);
      expect(await fsp.readFile(path.join(first.path, 'notes.txt'), 'utf8')).toBe('kept');
    });
  });

  it('counts a run out only once, however often it leaves', async () => {
    const counts: SessionFolderCounts = new Map();
    const first = ToolFolder.enter(counts, workdir, ids.sessionId);
    const second = ToolFolder.enter(counts, workdir, ids.sessionId);
    await second.create(ids, log);
    await first.leave(log);
    await first.leave(log);
    expect(await exists(second.path)).toBe(true);
    expect(counts.get(second.path)).toBe(1);
  });

  it('with one session at a time, works in the workdir itself: cleans its skills, never removes the folder', async () => {
    const cleanups: string[] = [];
    const folder = ToolFolder.shared(workdir);
    await folder.create(ids, log);
    await setUpSkill(folder, cleanups);
    await folder.leave(log);
    expect(folder.path).toBe(workdir);
    expect(cleanups).toEqual([workdir]);
    expect(await exists(workdir)).toBe(true);
  });

  it('a skills setup that fails is logged, and the session runs on: leaving still removes the folder', async () => {
    const lines: string[] = [];
    const capture = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
    const folder = ToolFolder.enter(new Map(), workdir, ids.sessionId);
    await folder.create(ids, log);
    await folder.setUpSkills(toolContext(folder.path), capture, async () => {
      throw new Error('skill download refused');
    });
    expect(lines.join('')).toContain('skill setup failed; the session runs without them');
    expect(lines.join('')).toContain('skill download refused');
    await folder.leave(capture);
    expect(await exists(folder.path)).toBe(false);
  });

  it('names the folder and the fix when it cannot be created', async () => {
    const blocker = path.join(workdir, 'not-a-dir');
    await fsp.writeFile(blocker, 'x');
    const folder = ToolFolder.enter(new Map(), blocker, ids.sessionId);
    await expect(folder.create(ids, log)).rejects.toMatchObject({
      code: 'MAW_CONFIG',
      message: expect.stringContaining(`cannot create the tool folder ${sessionWorkdir(blocker, ids.sessionId)} of session sesn_1`),
    });
  });

  it('never creates the folder through a symlink at sessions/<id>: moved aside, a real folder made, nothing written where it points', async () => {
    const victim = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-tool-folder-victim-'));
    try {
      const lines: string[] = [];
      const capture = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
      await fsp.mkdir(path.join(workdir, 'sessions'));
      await fsp.symlink(victim, path.join(workdir, 'sessions', ids.sessionId));
      const folder = ToolFolder.enter(new Map(), workdir, ids.sessionId);
      await folder.create(ids, capture);
      await setUpSkill(folder, []);
      expect((await fsp.lstat(folder.path)).isDirectory()).toBe(true);
      expect(await exists(path.join(folder.path, 'skills', 'pdf', 'SKILL.md'))).toBe(true);
      expect(await fsp.readdir(victim)).toEqual([]);
      const aside = (await fsp.readdir(path.join(workdir, 'sessions'))).filter((n) => n.startsWith(`${ids.sessionId}.moved-aside-`));
      expect(aside).toHaveLength(1);
      expect(lines.join('')).toContain(`${folder.path} was a symlink before the session's tool folder was created`);
      await folder.leave(log);
      expect(await exists(folder.path)).toBe(false);
      expect(await fsp.readdir(victim)).toEqual([]);
    } finally {
      await fsp.rm(victim, { recursive: true, force: true });
    }
  });

  it('hashes a session id that is not a plain id into the folder name', () => {
    expect(sessionWorkdir('/w', 'sesn_abc-1')).toBe('/w/sessions/sesn_abc-1');
    expect(sessionWorkdir('/w', '../escape')).toMatch(/^\/w\/sessions\/session-[0-9a-f]{32}$/);
  });
});
