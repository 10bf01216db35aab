// Pins that the skills of a multi-agent session's subagents get the same guard as the agent's own:
// with one session at a time in a shared workdir and no sandbox, a `skills` symlink that an earlier
// session left (pointing into another tenant's folder) is moved aside and never followed, whether
// the subagents are a coordinator's agents or the predefined agents of a `subagents` or `workflows`
// member, and although the agent itself has no skill. The folder the link pointed to and its file
// stay as they were. Where the installed SDK downloads subagents' skills (1.16 on; probed, not
// assumed from the version), the subagent's skill is set up in a plain `skills/` folder; where it
// does not (1.14, 1.15), nothing is written under `skills/` at all.
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { setupSkills, type AgentToolContext } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import { sdkAtLeast } from '../sdk-version.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Emulator, MultiagentListing } from '../../src/testing/index.js';
import { exists, harness, type Harness } from './helpers.js';

const SKILL_MD = '---\nname: pdf-tools\ndescription: Work with PDFs\n---\nRun scripts/extract.sh <file>.\n';

/** Whether the installed SDK's `setupSkills` downloads a subagent's skill: tried on a folder of its own. */
async function sdkDownloadsSubagentSkills(emu: Emulator, tmp: string, skillId: string): Promise<boolean> {
  const { sessionId } = await emu.createSession({ subagents: [{ skills: [{ skillId }] }] });
  const workdir = await fsp.mkdtemp(path.join(tmp, 'probe-'));
  const session = await emu.client().beta.sessions.retrieve(sessionId);
  const cleanup = await setupSkills({ workdir, client: emu.client(), session } as AgentToolContext);
  const downloaded = await exists(path.join(workdir, 'skills', 'pdf-tools', 'SKILL.md'));
  await cleanup();
  emu.archiveSession(sessionId);
  return downloaded;
}

describe("a subagent's skills, with a symlink planted at skills/ (no sandbox, one session at a time, shared workdir)", () => {
  let h: Harness;
  let emu: Emulator;
  let skillId: string;
  let downloads: boolean;
  beforeEach(async () => {
    h = await harness();
    emu = h.emu;
    ({ skillId } = emu.createSkill({ name: 'pdf-tools', files: { 'SKILL.md': SKILL_MD, 'scripts/extract.sh': 'pdftotext "$1" -\n' } }));
    downloads = await sdkDownloadsSubagentSkills(emu, h.tmp, skillId);
  });
  afterEach(async () => {
    await h.cleanup();
  });

  const listings: Array<{ description: string; multiagent: MultiagentListing }> = [
    { description: "a coordinator's agents", multiagent: 'coordinator' },
    { description: 'the predefined agents of the subagents member', multiagent: 'subagents' },
    { description: 'the predefined agents of the workflows member', multiagent: 'workflows' },
  ];

  it("the probe agrees with the SDK releases: subagents' skills are downloaded from 1.16 on", () => {
    expect(downloads).toBe(sdkAtLeast('1.16.0'));
  });

  it.each(listings)('$description: the link is moved aside, the folder it points to is intact', async ({ multiagent }) => {
    // Another tenant's folder, holding a folder of the skill's name with a file in it.
    const other = path.join(h.tmp, 'other-tenant');
    await fsp.mkdir(path.join(other, 'pdf-tools'), { recursive: true });
    await fsp.writeFile(path.join(other, 'pdf-tools', 'keep.md'), 'not the worker to delete');
    await fsp.writeFile(path.join(other, 'notes.md'), 'mine');
    await fsp.symlink(other, path.join(h.workdir, 'skills'));

    const { sessionId } = await emu.createSession({
      multiagent,
      subagents: [{ name: 'researcher', skills: [{ skillId }] }],
      script: [{ tool: 'bash', input: { command: 'ls skills/pdf-tools 2>&1; cat skills/pdf-tools/SKILL.md 2>&1; true' } }],
    });
    const agent = (await emu.client().beta.sessions.retrieve(sessionId)).agent;
    expect(agent.skills).toEqual([]);
    const worker = h.worker({ sandbox: 'none', concurrency: 1 });
    const running = worker.run();
    try {
      const done = await emu.waitForSession(sessionId, { timeoutMs: 20_000 });
      expect(done.toolResults.map((r) => [r.name, r.isError])).toEqual([['bash', false]]);

      // The other tenant's folder, file for file.
      expect((await fsp.readdir(other)).sort()).toEqual(['notes.md', 'pdf-tools']);
      expect(await fsp.readdir(path.join(other, 'pdf-tools'))).toEqual(['keep.md']);
      expect(await fsp.readFile(path.join(other, 'pdf-tools', 'keep.md'), 'utf8')).toBe('not the worker to delete');
      expect(await fsp.readFile(path.join(other, 'notes.md'), 'utf8')).toBe('mine');

      // The link was moved aside, still pointing where it did, and said so.
      const aside = (await fsp.readdir(h.workdir)).filter((n) => n.startsWith('skills.moved-aside-'));
      expect(aside).toHaveLength(1);
      expect(await fsp.readlink(path.join(h.workdir, aside[0]!))).toBe(other);
      const warning = h.capture.lines.find((l) => l.level === 40 && String(l.msg).includes('was a symlink before'));
      expect(warning).toMatchObject({ path: path.join(h.workdir, 'skills'), moved_to: path.join(h.workdir, aside[0]!) });

      if (downloads) {
        // The subagent's skill was set up in a plain folder before the first call.
        expect(done.toolResults[0]!.text).toContain('Run scripts/extract.sh <file>.');
        expect(done.toolResults[0]!.text).toContain('scripts');
        const skillCalls = emu.requests.filter((r) => r.route.startsWith('GET /v1/skills/') && r.credential === 'sessions_token');
        expect(skillCalls.map((r) => [r.route, r.status])).toEqual([
          ['GET /v1/skills/:skillId/versions/:version', 200],
          ['GET /v1/skills/:skillId/versions/:version/content', 200],
        ]);
      } else {
        expect(done.toolResults[0]!.text).toContain('No such file or directory');
      }
      // Cleaned up once the session ended; the plain `skills/` folder is not a link.
      const skills = await fsp.lstat(path.join(h.workdir, 'skills')).catch(() => undefined);
      expect(skills === undefined || skills.isDirectory()).toBe(true);
      expect(await exists(path.join(h.workdir, 'skills', 'pdf-tools'))).toBe(false);
    } finally {
      await worker.close();
      await running;
    }
  });
});
