import { z } from 'zod';
import { requireSessionAccess } from '../auth.js';
import { invalidRequest } from '../errors.js';
import { newId } from '../ids.js';
import type { Route } from '../router.js';
import { StreamHub } from '../sse.js';
import { decodeCursor, encodeCursor, enumQuery, intQuery, parseBody } from '../validate.js';

const UserEvent = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('user.tool_result'),
    tool_use_id: z.string().min(1),
    content: z.array(z.object({ type: z.string() }).loose()).optional(),
    is_error: z.boolean().nullable().optional(),
  }),
  z.object({
    type: z.literal('user.custom_tool_result'),
    custom_tool_use_id: z.string().min(1),
    content: z.array(z.object({ type: z.string() }).loose()).optional(),
    is_error: z.boolean().nullable().optional(),
  }),
  z.object({
    type: z.literal('user.tool_confirmation'),
    tool_use_id: z.string().min(1),
    result: z.enum(['allow', 'deny']),
    deny_message: z.string().nullable().optional(),
  }),
  z.object({ type: z.literal('user.message'), content: z.array(z.object({ type: z.string() }).loose()) }).loose(),
  z.object({ type: z.literal('user.interrupt') }).loose(),
  z.object({ type: z.literal('user.define_outcome') }).loose(),
]);

const SendBody = z.strictObject({ events: z.array(UserEvent).min(1) });

/** List, send and stream of `/v1/sessions/:id/events`. */
export const eventRoutes: Route[] = [
  {
    method: 'GET',
    template: '/v1/sessions/:id/events',
    handler({ params, query, principal, state }) {
      const session = state.session(params['id']!);
      requireSessionAccess(principal, session);
      const limit = intQuery(query, 'limit', { min: 1, max: 1000 }) ?? 20;
      const order = enumQuery(query, 'order', ['asc', 'desc'] as const) ?? 'asc';
      const types = [...query.getAll('types[]'), ...query.getAll('types')];
      const page = query.get('page');
      const offset = page ? Number(decodeCursor(page)['offset'] ?? 0) : 0;
      let events = types.length > 0 ? session.events.filter((e) => types.includes(e.type)) : [...session.events];
      if (order === 'desc') events = events.reverse();
      const slice = events.slice(offset, offset + limit);
      return {
        body: {
          data: slice,
          next_page: offset + limit < events.length ? encodeCursor({ offset: offset + limit }) : null,
        },
      };
    },
  },
  {
    method: 'POST',
    template: '/v1/sessions/:id/events',
    handler({ params, body, principal, state }) {
      const session = state.session(params['id']!);
      requireSessionAccess(principal, session);
      const parsed = parseBody(SendBody, body, 'events body');
      if (session.terminated) {
        throw invalidRequest(`session ${session.id} is terminated; it accepts no more events`);
      }
      for (const ev of parsed.events) {
        const thread = ev.type === 'user.tool_result' || ev.type === 'user.custom_tool_result' ? session.terminatedThreadOf(ev) : undefined;
        if (thread !== undefined) {
          throw invalidRequest(`session thread ${thread} of session ${session.id} is terminated; it accepts no more input`);
        }
      }
      const stored = parsed.events.map((ev) => session.append(ev));
      return { body: { data: stored } };
    },
  },
  {
    method: 'GET',
    template: '/v1/sessions/:id/events/stream',
    handler({ params, principal, state, res, headers }) {
      const session = state.session(params['id']!);
      requireSessionAccess(principal, session);
      session.hub.open(res, headers);
      if (session.terminated) {
        // A runner that missed the termination would otherwise wait forever. An archived session has
        // no such event in its history: the stream alone sends one (a runner that reads the status
        // stops on that, one that reads only events on this).
        const last = [...session.events].reverse().find((e) => e.type === 'session.status_terminated' || e.type === 'session.deleted');
        StreamHub.write(res, last ?? { type: 'session.status_terminated', id: newId('sevt'), processed_at: session.updatedAt });
        res.end();
        return { streamed: true };
      }
      if (principal.kind !== 'console') state.workerAttached(session);
      return { streamed: true };
    },
  },
];
