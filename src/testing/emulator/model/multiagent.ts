import { newId } from '../ids.js';
import { agentSnapshot, type AgentSkillReference } from './session.js';

/**
 * Where a multi-agent session's agent lists its subagents (`agent.multiagent`): `coordinator`
 * (`{ type: 'coordinator', agents }`), or the three-member `multiagent_20261001` shape with the
 * subagents as the predefined agents of its `subagents` member or of its `workflows` member.
 */
export type MultiagentListing = 'coordinator' | 'subagents' | 'workflows';

/** One subagent: a full agent definition (`BetaManagedAgentsSessionThreadAgent`) with its own skills. */
export interface SubagentSnapshotInit {
  name: string;
  skills: AgentSkillReference[];
}

/** The resolved `agent.multiagent` of a session whose agent has `subagents`, listed as `listing` says. */
export function multiagentSnapshot(listing: MultiagentListing, subagents: SubagentSnapshotInit[]): Record<string, unknown> {
  const agents = subagents.map((s) => {
    // A thread agent has every field of the session's agent but `multiagent`.
    const { multiagent: _none, ...agent } = agentSnapshot(newId('agent'), s.name, s.skills);
    return agent;
  });
  if (listing === 'coordinator') return { type: 'coordinator', agents };
  const enabled = { type: 'enabled', inline_agents: { type: 'disabled' }, predefined_agents: agents };
  const disabled = { type: 'disabled' };
  return {
    type: 'multiagent_20261001',
    advisor: { type: 'disabled' },
    subagents: listing === 'subagents' ? enabled : disabled,
    workflows: listing === 'workflows' ? enabled : disabled,
  };
}

/** Every skill id on a resolved agent: its own `skills[]` and those of each subagent in `multiagent`. */
export function agentSkillIds(agent: Record<string, unknown>): string[] {
  const own = (agent['skills'] ?? []) as Array<{ skill_id: string }>;
  const multiagent = agent['multiagent'] as Record<string, unknown> | null | undefined;
  const members: unknown[] = [];
  if (multiagent?.['type'] === 'coordinator') members.push(...((multiagent['agents'] ?? []) as unknown[]));
  if (multiagent?.['type'] === 'multiagent_20261001') {
    for (const key of ['subagents', 'workflows']) {
      const member = multiagent[key] as { type?: string; predefined_agents?: unknown[] } | undefined;
      if (member?.type === 'enabled') members.push(...(member.predefined_agents ?? []));
    }
  }
  const fromMembers = members.flatMap((m) => ((m as { skills?: Array<{ skill_id: string }> }).skills ?? []) as Array<{ skill_id: string }>);
  return [...own, ...fromMembers].map((s) => s.skill_id);
}
