import { z } from 'zod';
import { requireConsole, requireSessionAccess } from '../auth.js';

import type { Route } from '../router.js';
import type { StoreAttachment } from '../state.js';
import { decodeCursor, encodeCursor, intQuery, parseBody } from '../validate.js';

const MemoryStoreResource = z.object({
  type: z.literal('memory_store'),
  memory_store_id: z.string().min(1),
  access: z.enum(['read_write', 'read_only']).nullable().optional(),
  instructions: z.string().nullable().optional(),
  /** Emulator extension: where workers mount the store (`null`: no mount path). */
  mount_path: z.string().nullable().optional(),
});

const CreateBody = z.object({
  agent: z.union([z.string().min(1), z.object({ id: z.string().min(1) }).loose()]),
  environment_id: z.string().min(1),
  resources: z
    .array(
      z
        .object({ type: z.string() })
        .loose()
        .superRefine((r, ctx) => {
          if (r.type !== 'memory_store') {
            ctx.addIssue({
              code: 'custom',
              message: `resource type ${JSON.stringify(r.type)} is not supported by the emulator (only memory_store)`,
            });
          }
        }),
    )
    .optional(),
  metadata: z.record(z.string().max(64), z.string().max(512)).optional(),
  title: z.string().nullable().optional(),
  vault_ids: z.array(z.string()).optional(),
  budget: z.unknown().optional(),
  initial_events: z
    .array(z.object({ type: z.string() }).loose())
    .max(50)
    .optional(),
});

/** Create, retrieve, list and archive of `/v1/sessions`. */
export const sessionRoutes: Route[] = [
  {
    method: 'POST',
    template: '/v1/sessions',
    handler({ body, principal, state }) {
      requireConsole(principal, 'creating a session');
      const parsed = parseBody(CreateBody, body, 'session create body');
      const attachments: StoreAttachment[] = (parsed.resources ?? []).map((raw, i) => {
        const r = parseBody(MemoryStoreResource, raw, `resources[${i}]`);
        return {
          memoryStoreId: r.memory_store_id,
          ...(r.access !== undefined ? { access: r.access } : {}),
          ...(r.instructions !== undefined ? { instructions: r.instructions } : {}),
          ...(r.mount_path !== undefined ? { mountPath: r.mount_path } : {}),
        };
      });
      const agentId = typeof parsed.agent === 'string' ? parsed.agent : parsed.agent.id;
      const { session } = state.createSession({
        environmentId: parsed.environment_id,
        attachments,
        agentId,
        ...(parsed.metadata !== undefined ? { metadata: parsed.metadata } : {}),
        ...(parsed.title !== undefined ? { title: parsed.title } : {}),
      });
      for (const ev of parsed.initial_events ?? []) session.append(ev as { type: string });
      return { body: session.toObject() };
    },
  },
  {
    method: 'GET',
    template: '/v1/sessions',
    handler({ query, principal, state }) {
      requireConsole(principal, 'listing sessions');
      const limit = intQuery(query, 'limit', { min: 1, max: 1000 }) ?? 20;
      const page = query.get('page');
      const offset = page ? Number(decodeCursor(page)['offset'] ?? 0) : 0;
      const includeArchived = query.get('include_archived') === 'true';
      const all = [...state.sessions.values()].filter((s) => includeArchived || s.archivedAt === null).reverse();
      const slice = all.slice(offset, offset + limit);
      return {
        body: {
          data: slice.map((s) => s.toObject()),
          next_page: offset + limit < all.length ? encodeCursor({ offset: offset + limit }) : null,
          prev_page: offset > 0 ? encodeCursor({ offset: Math.max(0, offset - limit) }) : null,
        },
      };
    },
  },
  {
    method: 'GET',
    template: '/v1/sessions/:id',
    handler({ params, principal, state }) {
      const session = state.session(params['id']!);
      requireSessionAccess(principal, session);
      return { body: session.toObject() };
    },
  },
  {
    method: 'POST',
    template: '/v1/sessions/:id/archive',
    handler({ params, principal, state }) {
      const session = state.session(params['id']!);
      requireConsole(principal, 'archiving a session');
      state.archiveSession(session);
      return { body: session.toObject() };
    },
  },
  {
    method: 'DELETE',
    template: '/v1/sessions/:id',
    handler({ params, principal, state }) {
      const session = state.session(params['id']!);
      requireConsole(principal, 'deleting a session');
      session.markDeleted();
      state.sessions.delete(session.id);
      return { body: { id: session.id, type: 'session_deleted' } };
    },
  },
];
