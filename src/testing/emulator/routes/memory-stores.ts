import { z } from 'zod';
import { requireConsole, requireStoreAccess } from '../auth.js';
import { invalidRequest } from '../errors.js';
import { isoTime } from '../ids.js';
import type { Route } from '../router.js';
import { boolQuery, decodeCursor, encodeCursor, intQuery, parseBody } from '../validate.js';

// eslint-disable-next-line no-control-regex
const NoControl = /^[^\u0000-\u001f\u007f]*$/;
const Metadata = z.record(z.string().min(1).max(64), z.string().max(512)).refine((m) => Object.keys(m).length <= 16, {
  message: 'at most 16 metadata pairs',
});

const CreateBody = z.strictObject({
  name: z.string().min(1).max(255).regex(NoControl, 'must not contain control characters'),
  description: z.string().max(1024).optional(),
  metadata: Metadata.optional(),
});

const UpdateBody = z.strictObject({
  name: z.string().min(1).max(255).regex(NoControl, 'must not contain control characters').optional(),
  description: z.string().max(1024).nullable().optional(),
  metadata: z.record(z.string().min(1).max(64), z.string().max(512).nullable()).optional(),
});

/** Create, list, retrieve, update, delete and archive of `/v1/memory_stores`. */
export const memoryStoreRoutes: Route[] = [
  {
    method: 'POST',
    template: '/v1/memory_stores',
    handler({ body, principal, state }) {
      requireConsole(principal, 'creating a memory store');
      const parsed = parseBody(CreateBody, body, 'memory store create body');
      const store = state.createStore({
        name: parsed.name,
        ...(parsed.description !== undefined ? { description: parsed.description } : {}),
        ...(parsed.metadata !== undefined ? { metadata: parsed.metadata } : {}),
      });
      return { body: store.toObject() };
    },
  },
  {
    method: 'GET',
    template: '/v1/memory_stores',
    handler({ query, principal, state }) {
      requireConsole(principal, 'listing memory stores');
      const limit = intQuery(query, 'limit', { min: 1, max: 100 }) ?? 20;
      const includeArchived = boolQuery(query, 'include_archived') ?? false;
      const page = query.get('page');
      const offset = page ? Number(decodeCursor(page)['offset'] ?? 0) : 0;
      const all = [...state.stores.values()].filter((s) => includeArchived || s.archivedAt === null);
      const slice = all.slice(offset, offset + limit);
      return {
        body: {
          data: slice.map((s) => s.toObject()),
          next_page: offset + limit < all.length ? encodeCursor({ offset: offset + limit }) : null,
        },
      };
    },
  },
  {
    method: 'GET',
    template: '/v1/memory_stores/:id',
    handler({ params, principal, state }) {
      const store = state.store(params['id']!);
      requireStoreAccess(principal, store.id, (sid) => state.attachment(sid, store.id)?.access, 'read');
      return { body: store.toObject() };
    },
  },
  {
    method: 'POST',
    template: '/v1/memory_stores/:id',
    handler({ params, body, principal, state }) {
      const store = state.store(params['id']!);
      requireConsole(principal, 'updating a memory store');
      const parsed = parseBody(UpdateBody, body, 'memory store update body');
      if (store.archivedAt !== null) throw invalidRequest(`memory store ${store.id} is archived; it cannot be updated`);
      if (parsed.name !== undefined) store.name = parsed.name;
      if (parsed.description !== undefined) store.description = parsed.description ?? '';
      for (const [key, value] of Object.entries(parsed.metadata ?? {})) {
        if (value === null) delete store.metadata[key];
        else store.metadata[key] = value;
      }
      store.updatedAt = isoTime();
      return { body: store.toObject() };
    },
  },
  {
    method: 'DELETE',
    template: '/v1/memory_stores/:id',
    handler({ params, principal, state }) {
      const store = state.store(params['id']!);
      requireConsole(principal, 'deleting a memory store');
      state.stores.delete(store.id);
      return { body: { id: store.id, type: 'memory_store_deleted' } };
    },
  },
  {
    method: 'POST',
    template: '/v1/memory_stores/:id/archive',
    handler({ params, principal, state }) {
      const store = state.store(params['id']!);
      requireConsole(principal, 'archiving a memory store');
      store.archive();
      return { body: store.toObject() };
    },
  },
];
