// Pins when the worker guards `<workdir>/skills` before a skills setup: whenever the setup may
// write there, from the agent's own skills or from a subagent's (a coordinator's agents, the
// predefined agents of an enabled `subagents` or `workflows` member), and, read defensively,
// whenever the session's `multiagent` has a shape the worker does not know.
import { describe, expect, it } from 'vitest';
import { agentMayHaveSkills } from '../../src/worker/agent-skills.js';

const skill = { skill_id: 'skill_1', type: 'custom', version: '1' };
const withSkill = { type: 'agent', name: 'sub', skills: [skill] };
const withoutSkill = { type: 'agent', name: 'sub', skills: [] };
const disabled = { type: 'disabled' };
const enabled = (agents: unknown[]) => ({ type: 'enabled', inline_agents: disabled, predefined_agents: agents });
const m2026 = (subagents: unknown, workflows: unknown) => ({ type: 'multiagent_20261001', advisor: disabled, subagents, workflows });

describe('agentMayHaveSkills', () => {
  const rows: Array<{ description: string; agent: unknown; expected: boolean }> = [
    { description: 'no agent', agent: undefined, expected: false },
    { description: 'a single agent without skills', agent: { skills: [], multiagent: null }, expected: false },
    { description: 'a single agent with a skill', agent: { skills: [skill], multiagent: null }, expected: true },
    { description: 'an agent of an SDK without multiagent', agent: { skills: [] }, expected: false },
    { description: 'skills that are not a list', agent: { skills: 'x', multiagent: null }, expected: true },
    {
      description: 'a coordinator whose agent has a skill',
      agent: { skills: [], multiagent: { type: 'coordinator', agents: [withSkill] } },
      expected: true,
    },
    {
      description: 'a coordinator whose agents have none (an advisor among them)',
      agent: { skills: [], multiagent: { type: 'coordinator', agents: [withoutSkill, { type: 'advisor', model: 'm' }] } },
      expected: false,
    },
    {
      description: 'a coordinator with an agents list of an unknown shape',
      agent: { skills: [], multiagent: { type: 'coordinator', agents: {} } },
      expected: true,
    },
    {
      description: 'a coordinator with a member that is not an object',
      agent: { skills: [], multiagent: { type: 'coordinator', agents: ['agent_1'] } },
      expected: true,
    },
    {
      description: 'enabled subagents with a skill',
      agent: { skills: [], multiagent: m2026(enabled([withSkill]), disabled) },
      expected: true,
    },
    {
      description: 'enabled workflows with a skill',
      agent: { skills: [], multiagent: m2026(disabled, enabled([withSkill])) },
      expected: true,
    },
    {
      description: 'enabled members without skills',
      agent: { skills: [], multiagent: m2026(enabled([withoutSkill]), enabled([])) },
      expected: false,
    },
    { description: 'both members disabled', agent: { skills: [], multiagent: m2026(disabled, disabled) }, expected: false },
    {
      description: 'a member of an unknown type',
      agent: { skills: [], multiagent: m2026({ type: 'sometimes' }, disabled) },
      expected: true,
    },
    {
      description: 'a member missing',
      agent: { skills: [], multiagent: { type: 'multiagent_20261001', subagents: disabled } },
      expected: false,
    },
    {
      description: 'a multiagent type not known here',
      agent: { skills: [], multiagent: { type: 'swarm_20270101', agents: [] } },
      expected: true,
    },
    { description: 'a multiagent that is not an object', agent: { skills: [], multiagent: 'coordinator' }, expected: true },
  ];
  it.each(rows)('$description → $expected', ({ agent, expected }) => {
    expect(agentMayHaveSkills(agent)).toBe(expected);
  });
});
