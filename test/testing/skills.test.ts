/**
 * Pins the emulator's skills: a session's agent carries `skills[]` as the SDK
 * types them; `GET /v1/skills/:id/versions/:version` serves the version object (`latest` resolves
 * to the newest) and `…/content` a tar archive with one wrapper folder that the SDK's own
 * `setupSkills` extracts to `<workdir>/skills/<name>/`; the console key, any environment key and
 * the sessions token of a session whose agent has the skill are accepted with no beta header;
 * other tokens get 403, unknown credentials 401, unknown skills/versions 404; faults apply. A
 * multi-agent session lists its subagents (with their own skills) on `agent.multiagent` in the
 * shapes the SDK types, and its token may read its subagents' skills too.
 * All through the real SDK client.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { setupSkills } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator, type SkillHandle } from '../../src/testing/index.js';
import { errorBody, expectApiError } from './helpers.js';

let emu: Emulator;
let tmp: string;
let skill: SkillHandle;
let withSkill: { sessionId: string; workId: string };
let withoutSkill: { sessionId: string; workId: string };
const deepPath = `${'nested-folder-name/'.repeat(6)}deep-file-with-a-long-name.txt`; // > 100 bytes with the wrapper

beforeAll(async () => {
  tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-emu-skills-'));
  emu = await startEmulator({ mountRoot: path.join(tmp, 'mnt') });
  skill = emu.createSkill({
    name: 'pdf-tools',
    description: 'Work with PDFs',
    files: { 'SKILL.md': '---\nname: pdf-tools\n---\nUse pdftotext.\n', 'scripts/run.sh': 'echo hi\n', [deepPath]: 'deep' },
  });
  withSkill = await emu.createSession({ skills: [{ skillId: skill.skillId }] });
  withoutSkill = await emu.createSession({});
});
afterAll(async () => {
  await emu.close();
  await fsp.rm(tmp, { recursive: true, force: true });
});

function bearer(token: string): Anthropic {
  return new Anthropic({ apiKey: null, authToken: token, baseURL: emu.baseURL, maxRetries: 0, logLevel: 'off' });
}

describe('a session with a skill', () => {
  it('carries it on the resolved agent as { skill_id, type, version } (concrete version id); other sessions keep skills: []', async () => {
    const s = await emu.client().beta.sessions.retrieve(withSkill.sessionId);
    expect(s.agent.skills).toEqual([{ skill_id: skill.skillId, type: 'custom', version: skill.versionId }]);
    expect((await emu.client().beta.sessions.retrieve(withoutSkill.sessionId)).agent.skills).toEqual([]);
  });

  it("inline { name, files } creates a skill for that session; { version: 'latest' } is passed through", async () => {
    const { sessionId } = await emu.createSession({
      skills: [
        { name: 'inline-one', files: { 'SKILL.md': 'inline' } },
        { skillId: skill.skillId, version: 'latest' },
      ],
    });
    const agentSkills = (await emu.client().beta.sessions.retrieve(sessionId)).agent.skills;
    expect(agentSkills).toHaveLength(2);
    expect(agentSkills[0]!.skill_id).toMatch(/^skill_/);
    expect(agentSkills[1]).toEqual({ skill_id: skill.skillId, type: 'custom', version: 'latest' });
    const v = await emu.client().beta.skills.versions.retrieve('latest', { skill_id: agentSkills[0]!.skill_id });
    expect(v.name).toBe('inline-one');
  });
});

describe('a multi-agent session whose subagents carry skills', () => {
  it('lists them on agent.multiagent in each shape the SDK types, and lets the sessions token read their skills', async () => {
    const sub = emu.createSkill({ name: 'sub-only', files: { 'SKILL.md': 'sub' } });
    const ref = { skill_id: sub.skillId, type: 'custom', version: sub.versionId };
    const created = await emu.createSession({ subagents: [{ name: 'researcher', skills: [{ skillId: sub.skillId }] }] });
    const coordinator = (await emu.client().beta.sessions.retrieve(created.sessionId)).agent;
    expect(coordinator.skills).toEqual([]);
    expect(coordinator.multiagent).toEqual({
      type: 'coordinator',
      agents: [expect.objectContaining({ type: 'agent', name: 'researcher', skills: [ref], id: expect.stringMatching(/^agent_/) })],
    });
    const multi = coordinator.multiagent!;
    expect(multi.type === 'coordinator' && 'multiagent' in multi.agents[0]!).toBe(false);
    const token = bearer(emu.sessionsToken(created.workId)!);
    expect((await token.beta.skills.versions.retrieve(sub.versionId, { skill_id: sub.skillId })).name).toBe('sub-only');
    await expectApiError(token.beta.skills.versions.retrieve('latest', { skill_id: skill.skillId }), 403, 'permission_error');

    for (const member of ['subagents', 'workflows'] as const) {
      const s = await emu.createSession({ multiagent: member, subagents: [{ skills: [{ skillId: sub.skillId }] }] });
      const multiagent = (await emu.client().beta.sessions.retrieve(s.sessionId)).agent.multiagent;
      const other = member === 'subagents' ? 'workflows' : 'subagents';
      expect(multiagent).toMatchObject({
        type: 'multiagent_20261001',
        advisor: { type: 'disabled' },
        [member]: { type: 'enabled', inline_agents: { type: 'disabled' }, predefined_agents: [{ name: 'subagent 1', skills: [ref] }] },
        [other]: { type: 'disabled' },
      });
      const t = bearer(emu.sessionsToken(s.workId)!);
      expect((await t.beta.skills.versions.retrieve('latest', { skill_id: sub.skillId })).id).toBe(sub.versionId);
    }
  });
});

describe('GET /v1/skills/:id/versions/:version', () => {
  it('returns the version object by id and resolves latest to the newest version', async () => {
    const c = emu.client();
    const v = await c.beta.skills.versions.retrieve(skill.versionId, { skill_id: skill.skillId });
    expect(v).toEqual({
      id: skill.versionId,
      type: 'skill_version',
      skill_id: skill.skillId,
      name: 'pdf-tools',
      description: 'Work with PDFs',
      created_at: expect.any(String),
    });
    const other = emu.createSkill({ name: 'versioned', files: { 'SKILL.md': 'v1' } });
    const v2 = emu.addSkillVersion(other.skillId, { 'SKILL.md': 'v2' });
    expect(v2.id).not.toBe(other.versionId);
    expect((await c.beta.skills.versions.retrieve('latest', { skill_id: other.skillId })).id).toBe(v2.id);
    expect((await c.beta.skills.versions.retrieve(other.versionId, { skill_id: other.skillId })).id).toBe(other.versionId);
  });

  it('answers 404 not_found_error naming an unknown skill or version', async () => {
    const c = emu.client({ maxRetries: 0 });
    const e1 = await expectApiError(c.beta.skills.versions.retrieve('latest', { skill_id: 'skill_nope' }), 404, 'not_found_error');
    expect(e1.message).toContain('skill_nope');
    const e2 = await expectApiError(c.beta.skills.versions.retrieve('123', { skill_id: skill.skillId }), 404, 'not_found_error');
    expect(errorBody(e2)['message']).toBe(`skill ${skill.skillId} has no version "123"`);
  });

  it('refuses a bad skill name or a missing SKILL.md at creation', () => {
    expect(() => emu.createSkill({ name: 'Bad Name', files: { 'SKILL.md': 'x' } })).toThrow(/kebab-case/);
    expect(() => emu.createSkill({ name: 'no-skill-md', files: { 'README.md': 'x' } })).toThrow(/SKILL\.md/);
    expect(() => emu.createSkill({ name: 'escape', files: { 'SKILL.md': 'x', '../x': 'y' } })).toThrow(/'\.\.'/);
  });
});

describe('GET /v1/skills/:id/versions/:version/content', () => {
  it('sends a tar archive with one <name>/ wrapper folder (long member names included)', async () => {
    const resp = await emu.client().beta.skills.versions.download(skill.versionId, { skill_id: skill.skillId });
    expect(resp.headers.get('content-type')).toBe('application/x-tar');
    const bytes = Buffer.from(await resp.arrayBuffer());
    expect(bytes.length % 512).toBe(0);
    expect(bytes.subarray(257, 262).toString('ascii')).toBe('ustar');
    const file = path.join(tmp, 'bundle.tar');
    await fsp.writeFile(file, bytes);
    const { execFileSync } = await import('node:child_process');
    const names = execFileSync('tar', ['-tf', file], { encoding: 'utf8' }).trim().split('\n');
    expect(names.every((n) => n.startsWith('pdf-tools/'))).toBe(true);
    expect(names).toContain('pdf-tools/SKILL.md');
    expect(names).toContain(`pdf-tools/${deepPath}`);
    expect(emu.requests.at(-1)!.route).toBe('GET /v1/skills/:skillId/versions/:version/content');
  });

  it("is what the SDK's setupSkills extracts into <workdir>/skills/<name>/, and its cleanup removes", async () => {
    const workdir = await fsp.mkdtemp(path.join(tmp, 'work-'));
    const client = emu.sessionClient(withSkill.workId, { maxRetries: 0 });
    const session = await client.beta.sessions.retrieve(withSkill.sessionId);
    const cleanup = await setupSkills({ workdir, client, session });
    const dir = path.join(workdir, 'skills', 'pdf-tools');
    expect(await fsp.readFile(path.join(dir, 'SKILL.md'), 'utf8')).toBe('---\nname: pdf-tools\n---\nUse pdftotext.\n');
    expect(await fsp.readFile(path.join(dir, 'scripts/run.sh'), 'utf8')).toBe('echo hi\n');
    expect(await fsp.readFile(path.join(dir, deepPath), 'utf8')).toBe('deep');
    await cleanup();
    await expect(fsp.stat(dir)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('credentials on the skills routes', () => {
  it('accept the console key, an environment key and the sessions token of a session whose agent has the skill, without a beta header', async () => {
    const clients = {
      console: emu.client({ maxRetries: 0 }),
      env: bearer(emu.environmentKey),
      otherEnv: bearer(emu.createEnvironment({ name: 'other' }).key),
      token: bearer(emu.sessionsToken(withSkill.workId)!),
    };
    for (const [who, c] of Object.entries(clients)) {
      const v = await c.beta.skills.versions.retrieve('latest', { skill_id: skill.skillId });
      expect(v.id, who).toBe(skill.versionId);
      const resp = await c.beta.skills.versions.download(v.id, { skill_id: skill.skillId });
      expect(resp.status, who).toBe(200);
      await resp.arrayBuffer();
    }
    const kinds = emu.requests.filter((r) => r.route.startsWith('GET /v1/skills/')).map((r) => r.credential);
    expect(new Set(kinds)).toEqual(new Set(['console', 'environment_key', 'sessions_token']));
  });

  it('refuse the sessions token of a session whose agent lacks the skill (403), and unknown credentials (401)', async () => {
    const other = bearer(emu.sessionsToken(withoutSkill.workId)!);
    const e = await expectApiError(other.beta.skills.versions.retrieve('latest', { skill_id: skill.skillId }), 403, 'permission_error');
    expect(e.message).toContain(skill.skillId);
    await expectApiError(other.beta.skills.versions.download(skill.versionId, { skill_id: skill.skillId }), 403, 'permission_error');
    await expectApiError(
      bearer('sk-ant-api-unknown').beta.skills.versions.retrieve('latest', { skill_id: skill.skillId }),
      401,
      'authentication_error',
    );
  });
});

describe('faults on the skills routes', () => {
  it('a 500 rule on the content route fails the download with 500 and retires after `times`', async () => {
    const rule = emu.faults.add({ route: /^GET \/v1\/skills\/[^/]+\/versions\/[^/]+\/content$/, status: 500, times: 1 });
    const c = emu.client({ maxRetries: 0 });
    await expectApiError(c.beta.skills.versions.download(skill.versionId, { skill_id: skill.skillId }), 500, 'api_error');
    expect(rule.hits).toBe(1);
    const ok = await c.beta.skills.versions.download(skill.versionId, { skill_id: skill.skillId });
    expect((await ok.arrayBuffer()).byteLength).toBeGreaterThan(0);
  });
});
