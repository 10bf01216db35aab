import { requireSkillAccess } from '../auth.js';
import { agentSkillIds as skillIdsOfAgent } from '../model/multiagent.js';
import type { Route, RouteContext } from '../router.js';

/** Skill ids on the resolved agent of a session and on its subagents (none for an unknown session). */
function agentSkillIds(ctx: RouteContext): (sessionId: string) => string[] {
  return (sessionId) => {
    const agent = ctx.state.sessions.get(sessionId)?.agent;
    return agent ? skillIdsOfAgent(agent) : [];
  };
}

/**
 * `GET /v1/skills/:skillId/versions/:version` (the version object; `latest` resolves to the newest)
 * and `GET …/:version/content` (the bundle as a ustar archive). No beta header is required.
 */
export const skillRoutes: Route[] = [
  {
    method: 'GET',
    template: '/v1/skills/:skillId/versions/:version',
    handler(ctx) {
      const skillId = ctx.params['skillId']!;
      requireSkillAccess(ctx.principal, skillId, agentSkillIds(ctx));
      return { body: { ...ctx.state.skill(skillId).version(ctx.params['version']!).object } };
    },
  },
  {
    method: 'GET',
    template: '/v1/skills/:skillId/versions/:version/content',
    handler(ctx) {
      const skillId = ctx.params['skillId']!;
      requireSkillAccess(ctx.principal, skillId, agentSkillIds(ctx));
      const skill = ctx.state.skill(skillId);
      const version = skill.version(ctx.params['version']!).object;
      return {
        body: skill.archive(version.id),
        headers: {
          'content-type': 'application/x-tar',
          'content-disposition': `attachment; filename="${skill.name}.tar"`,
        },
      };
    },
  },
];
