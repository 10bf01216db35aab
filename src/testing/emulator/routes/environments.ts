import { z } from 'zod';
import { requireConsole } from '../auth.js';
import { isoTime } from '../ids.js';
import type { Route } from '../router.js';
import { decodeCursor, encodeCursor, intQuery, parseBody } from '../validate.js';

const CreateBody = z.object({
  name: z.string().min(1),
  description: z.string().nullable().optional(),
  metadata: z.record(z.string(), z.string()).optional(),
  config: z
    .object({ type: z.enum(['self_hosted', 'cloud']) })
    .loose()
    .optional(),
  scope: z.string().optional(),
});

/** Create, list, retrieve and archive of `/v1/environments` (keys are issued out of band). */
export const environmentRoutes: Route[] = [
  {
    method: 'POST',
    template: '/v1/environments',
    handler({ body, principal, state }) {
      requireConsole(principal, 'creating an environment');
      const parsed = parseBody(CreateBody, body, 'environment create body');
      const env = state.createEnvironment({
        name: parsed.name,
        type: parsed.config?.type ?? 'self_hosted',
        description: parsed.description ?? null,
        ...(parsed.metadata !== undefined ? { metadata: parsed.metadata } : {}),
      });
      return { body: state.environmentObject(env) };
    },
  },
  {
    method: 'GET',
    template: '/v1/environments',
    handler({ query, principal, state }) {
      requireConsole(principal, 'listing environments');
      const limit = intQuery(query, 'limit', { min: 1, max: 100 }) ?? 20;
      const page = query.get('page');
      const offset = page ? Number(decodeCursor(page)['offset'] ?? 0) : 0;
      const all = [...state.environments.values()];
      return {
        body: {
          data: all.slice(offset, offset + limit).map((e) => state.environmentObject(e)),
          next_page: offset + limit < all.length ? encodeCursor({ offset: offset + limit }) : null,
        },
      };
    },
  },
  {
    method: 'GET',
    template: '/v1/environments/:id',
    handler({ params, principal, state }) {
      const env = state.environment(params['id']!);
      requireConsole(principal, 'retrieving an environment');
      return { body: state.environmentObject(env) };
    },
  },
  {
    method: 'POST',
    template: '/v1/environments/:id/archive',
    handler({ params, principal, state }) {
      const env = state.environment(params['id']!);
      requireConsole(principal, 'archiving an environment');
      env.archivedAt ??= isoTime();
      env.updatedAt = env.archivedAt;
      return { body: state.environmentObject(env) };
    },
  },
];
