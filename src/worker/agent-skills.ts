/**
 * Whether a skills setup may write under `<workdir>/skills` for a session's agent (as the session
 * object carries it). Skills come from the agent's own `skills[]` and from its subagents: the
 * agents of a `coordinator`, and the predefined agents of an enabled `subagents` or `workflows`
 * member of a `multiagent_20261001` configuration. Some SDK versions download the agent's skills
 * only, newer ones the subagents' too; the answer covers both, so the guard around the setup is
 * the same on every version.
 *
 * Read defensively (the session comes from the server): a `multiagent` whose shape is not one of
 * the above counts as having skills. Guarding a folder that needed no guard costs a rename of
 * whatever the agent put at `skills`; not guarding one that did can cost another tenant's files.
 */
export function agentMayHaveSkills(agent: unknown): boolean {
  if (!isObject(agent)) return false;
  if (hasSkills(agent)) return true;
  const multiagent = agent['multiagent'];
  if (multiagent === null || multiagent === undefined) return false;
  if (!isObject(multiagent)) return true;
  switch (multiagent['type']) {
    case 'coordinator':
      return membersMayHaveSkills(multiagent['agents']);
    case 'multiagent_20261001':
      return ['subagents', 'workflows'].some((key) => {
        const member = multiagent[key];
        if (isObject(member) && member['type'] === 'disabled') return false;
        if (isObject(member) && member['type'] === 'enabled') return membersMayHaveSkills(member['predefined_agents']);
        // Absent, or of a shape not known here.
        return member !== undefined;
      });
    default:
      return true;
  }
}

/** A list of member agents: any member with skills, or a list (or member) of an unknown shape. */
function membersMayHaveSkills(members: unknown): boolean {
  if (!Array.isArray(members)) return members !== undefined;
  return members.some((m) => !isObject(m) || hasSkills(m));
}

/** An agent whose `skills` is a non-empty list, or anything but a list. */
function hasSkills(agent: Record<string, unknown>): boolean {
  const skills = agent['skills'];
  if (skills === undefined || skills === null) return false;
  return !Array.isArray(skills) || skills.length > 0;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
