import { z } from 'zod';
import { requireConsole, requireWorkAccess } from '../auth.js';
import { invalidRequest, permissionDenied } from '../errors.js';
import type { Route } from '../router.js';
import { decodeCursor, encodeCursor, intQuery, parseBody } from '../validate.js';

const StopBody = z.strictObject({ force: z.boolean().optional() }).optional();
const UpdateBody = z.strictObject({ metadata: z.record(z.string(), z.string().nullable()) });

/** Poll, ack, heartbeat, stop, retrieve, update, list and stats of `/v1/environments/:id/work`. */
export const workRoutes: Route[] = [
  {
    method: 'GET',
    template: '/v1/environments/:id/work/poll',
    async handler({ params, query, principal, state, signal }) {
      const env = state.environment(params['id']!);
      if (principal.kind === 'sessions_token') throw permissionDenied('polling needs the environment key, not a sessions token');
      if (principal.kind === 'environment_key' && principal.environmentId !== env.id) {
        throw permissionDenied(`this environment key belongs to ${principal.environmentId}, not ${env.id}`);
      }
      const raw = query.get('block_ms');
      if (raw !== null && /^\d+$/.test(raw) && Number(raw) > 999) {
        throw invalidRequest(`block_ms: must be at most 999, got ${raw}`);
      }
      const blockMs = intQuery(query, 'block_ms', { min: 0, max: 999 }) ?? 0;
      const reclaimOlderThanMs = intQuery(query, 'reclaim_older_than_ms', { min: 1 });
      const item = await state.queue.poll(env.id, { blockMs, reclaimOlderThanMs, signal });
      return { body: item ? state.queue.toObject(item, true) : null };
    },
  },
  {
    method: 'GET',
    template: '/v1/environments/:id/work/stats',
    handler({ params, principal, state }) {
      const env = state.environment(params['id']!);
      if (principal.kind === 'sessions_token') throw permissionDenied('work stats need an API key or the environment key');
      if (principal.kind === 'environment_key' && principal.environmentId !== env.id) {
        throw permissionDenied(`this environment key belongs to ${principal.environmentId}, not ${env.id}`);
      }
      const items = state.queue.all().filter((w) => w.environmentId === env.id && w.state === 'queued');
      const depth = items.filter((w) => w.deliveredAtMs === null).length;
      const pending = items.length - depth;
      const oldest = items.reduce<number | null>((min, w) => (min === null || w.createdAtMs < min ? w.createdAtMs : min), null);
      return {
        body: {
          type: 'work_queue_stats',
          depth,
          pending,
          oldest_queued_at: oldest === null ? null : new Date(oldest).toISOString(),
          workers_polling: null,
        },
      };
    },
  },
  {
    method: 'GET',
    template: '/v1/environments/:id/work',
    handler({ params, query, principal, state }) {
      const env = state.environment(params['id']!);
      // As the API documents: this endpoint takes the environment key and rejects an API key.
      if (principal.kind !== 'environment_key') {
        throw permissionDenied(`listing work needs the environment key of ${env.id}; an API key or sessions token is rejected`);
      }
      if (principal.environmentId !== env.id) {
        throw permissionDenied(`this environment key belongs to ${principal.environmentId}, not ${env.id}`);
      }
      const limit = intQuery(query, 'limit', { min: 1, max: 100 }) ?? 20;
      const page = query.get('page');
      const offset = page ? Number(decodeCursor(page)['offset'] ?? 0) : 0;
      const items = state.queue.all().filter((w) => w.environmentId === env.id);
      const slice = items.slice(offset, offset + limit);
      const next = offset + limit < items.length ? encodeCursor({ offset: offset + limit }) : null;
      return { body: { data: slice.map((w) => state.queue.toObject(w)), next_page: next } };
    },
  },
  {
    method: 'POST',
    template: '/v1/environments/:id/work/:workId/ack',
    handler({ params, principal, state }) {
      const item = state.queue.get(params['id']!, params['workId']!);
      requireWorkAccess(principal, item);
      return { body: state.queue.toObject(state.queue.ack(item)) };
    },
  },
  {
    method: 'POST',
    template: '/v1/environments/:id/work/:workId/heartbeat',
    handler({ params, query, principal, state }) {
      const item = state.queue.get(params['id']!, params['workId']!);
      requireWorkAccess(principal, item);
      const expected = query.get('expected_last_heartbeat') ?? undefined;
      const desired = intQuery(query, 'desired_ttl_seconds', { min: 1, max: 3600 });
      return { body: state.queue.heartbeat(item, expected, desired) };
    },
  },
  {
    method: 'POST',
    template: '/v1/environments/:id/work/:workId/stop',
    handler({ params, body, principal, state }) {
      const item = state.queue.get(params['id']!, params['workId']!);
      requireWorkAccess(principal, item);
      const parsed = parseBody(StopBody, body, 'stop body');
      return { body: state.queue.toObject(state.queue.stop(item, parsed?.force === true)) };
    },
  },
  {
    method: 'GET',
    template: '/v1/environments/:id/work/:workId',
    handler({ params, principal, state }) {
      const item = state.queue.get(params['id']!, params['workId']!);
      requireConsole(principal, 'retrieving a work item');
      return { body: state.queue.toObject(item) };
    },
  },
  {
    method: 'POST',
    template: '/v1/environments/:id/work/:workId',
    handler({ params, body, principal, state }) {
      const item = state.queue.get(params['id']!, params['workId']!);
      requireConsole(principal, 'updating a work item');
      const parsed = parseBody(UpdateBody, body, 'work update body');
      return { body: state.queue.toObject(state.queue.updateMetadata(item, parsed.metadata)) };
    },
  },
];
