// Pins each session's tool workdir: with `concurrency: 1` it is `workdir` itself (as the official
// worker); with `concurrency > 1` every session gets its own `<workdir>/sessions/<session id>`, so
// two sessions running at once never share files — neither the agent's own files nor the skills
// `setupSkills` writes to (and its cleanup removes from) `<tool workdir>/skills/<name>`. The folder
// is kept while it holds files (a later work item of the same session finds them) and removed
// when the session left it empty.
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { betaAgentToolset20260401, type AgentToolContext } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimNext, exists, harness, type Harness } from './helpers.js';

describe("a session's tool workdir", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  function recordingTools(seen: Map<string, string>) {
    return (ctx: AgentToolContext) => {
      seen.set(ctx.session!.id, ctx.workdir);
      return betaAgentToolset20260401(ctx);
    };
  }

  it('is a folder of its own per session with concurrency > 1, so sessions running at once share no file', async () => {
    const { emu } = h;
    const a = await emu.createSession({
      script: [
        { tool: 'write', input: { file_path: 'notes.txt', content: 'from A' } },
        { sleepMs: 1_500 },
        { tool: 'read', input: { file_path: 'notes.txt' } },
        { tool: 'bash', input: { command: 'pwd' } },
      ],
    });
    const b = await emu.createSession({
      script: [
        { sleepMs: 200 },
        { tool: 'write', input: { file_path: 'notes.txt', content: 'from B' } },
        { tool: 'read', input: { file_path: 'notes.txt' } },
        { tool: 'bash', input: { command: 'pwd' } },
      ],
    });
    // A third session leaves nothing behind: its folder is removed at the end.
    const c = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'pwd' } }] });
    const seen = new Map<string, string>();
    const worker = h.worker({ concurrency: 3, tools: recordingTools(seen) });
    const running = worker.run();
    const [doneA, doneB, doneC] = await Promise.all([a, b, c].map((s) => emu.waitForSession(s.sessionId, { timeoutMs: 20_000 })));
    await worker.close();
    await running;

    const dirA = path.join(h.workdir, 'sessions', a.sessionId);
    const dirB = path.join(h.workdir, 'sessions', b.sessionId);
    const dirC = path.join(h.workdir, 'sessions', c.sessionId);
    expect(seen.get(a.sessionId)).toBe(dirA);
    expect(seen.get(b.sessionId)).toBe(dirB);
    expect(doneA!.toolResults.map((r) => [r.name, r.isError])).toEqual([
      ['write', false],
      ['read', false],
      ['bash', false],
    ]);
    expect(doneA!.toolResults[1]!.text).toContain('from A');
    expect(doneA!.toolResults[2]!.text.trim()).toBe(await fsp.realpath(dirA));
    expect(doneB!.toolResults[1]!.text).toContain('from B');
    expect(doneB!.toolResults[2]!.text.trim()).toBe(await fsp.realpath(dirB));
    // Files the agent left stay for a later work item of the same session; an empty folder goes.
    expect(await fsp.readFile(path.join(dirA, 'notes.txt'), 'utf8')).toBe('from A');
    expect(await fsp.readFile(path.join(dirB, 'notes.txt'), 'utf8')).toBe('from B');
    expect(path.basename(doneC!.toolResults[0]!.text.trim())).toBe(c.sessionId);
    expect(await exists(dirC)).toBe(false);
    expect(await exists(path.join(h.workdir, 'notes.txt'))).toBe(false);
  });

  it('is the workdir itself with concurrency 1, as with the official worker', async () => {
    const { emu } = h;
    const s = await emu.createSession({ script: [{ tool: 'write', input: { file_path: 'notes.txt', content: 'one' } }] });
    const seen = new Map<string, string>();
    const worker = h.worker({ tools: recordingTools(seen) });
    const running = worker.run();
    await emu.waitForSession(s.sessionId, { timeoutMs: 20_000 });
    await worker.close();
    await running;

    expect(seen.get(s.sessionId)).toBe(h.workdir);
    expect(await fsp.readFile(path.join(h.workdir, 'notes.txt'), 'utf8')).toBe('one');
    expect(await exists(path.join(h.workdir, 'sessions'))).toBe(false);
  });

  it('warns once when handleItem() serves more items at once than `concurrency` (they would share the workdir)', async () => {
    const { emu } = h;
    const a = await emu.createSession({ script: [{ sleepMs: 500 }, { tool: 'bash', input: { command: 'true' } }] });
    const b = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'true' } }] });
    const claimedA = await claimNext(h);
    const claimedB = await claimNext(h);
    const worker = h.worker({ environmentId: undefined });
    const outcomes = await Promise.all([claimedA, claimedB].map((c) => worker.handleItem({ ...c, workSecret: c.secret! })));

    expect(outcomes.map((o) => o.status)).toEqual(['completed', 'completed']);
    const warnings = h.capture.lines.filter((l) => l.level === 40 && l.msg.includes('handleItem() called while'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toContain('`concurrency`');
    await Promise.all([a, b].map((s) => emu.waitForSession(s.sessionId, { timeoutMs: 10_000 })));
  });
});

describe('a symlink left at sessions/ in the workdir (one session at a time shares the workdir with every agent)', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('is moved aside and never followed: the next session works in a real sessions/<id>, nothing lands where the link points', async () => {
    const { emu } = h;
    // What an agent of an earlier session (served with concurrency 1, in this very workdir) left.
    const victim = path.join(h.tmp, 'another-tenants-folder');
    await fsp.mkdir(victim);
    await fsp.symlink(victim, path.join(h.workdir, 'sessions'));

    const s = await emu.createSession({
      script: [
        { tool: 'write', input: { file_path: 'secret.txt', content: 'the next tenant' } },
        { tool: 'bash', input: { command: 'pwd' } },
      ],
    });
    const worker = h.worker({ concurrency: 2 });
    const running = worker.run();
    const done = await emu.waitForSession(s.sessionId, { timeoutMs: 20_000 });
    await worker.close();
    await running;

    expect(done.toolResults.map((r) => [r.name, r.isError])).toEqual([
      ['write', false],
      ['bash', false],
    ]);
    expect(await fsp.readdir(victim)).toEqual([]);
    const own = path.join(h.workdir, 'sessions', s.sessionId);
    expect((await fsp.lstat(path.join(h.workdir, 'sessions'))).isDirectory()).toBe(true);
    expect(await fsp.readFile(path.join(own, 'secret.txt'), 'utf8')).toBe('the next tenant');
    const aside = (await fsp.readdir(h.workdir)).filter((n) => n.startsWith('sessions.moved-aside-'));
    expect(aside).toHaveLength(1);
    expect(await fsp.readlink(path.join(h.workdir, aside[0]!))).toBe(victim);
    const warning = h.capture.lines.find((l) => l.level === 40 && String(l.msg).includes('was a symlink before'));
    expect(warning).toMatchObject({ path: path.join(h.workdir, 'sessions'), moved_to: path.join(h.workdir, aside[0]!) });
  });
});
