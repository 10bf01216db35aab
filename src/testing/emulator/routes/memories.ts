import { z } from 'zod';
import { requireStoreAccess, type Principal } from '../auth.js';
import { invalidRequest } from '../errors.js';
import { pathPrefixProblem } from '../model/memory-paths.js';
import type { MemoryView } from '../model/memory-store.js';
import type { Route } from '../router.js';
import type { EmulatorState } from '../state.js';
import { decodeCursor, encodeCursor, enumQuery, intQuery, parseBody } from '../validate.js';

/** Page caps per view; larger `limit`s are clamped. */
export const PAGE_CAP = { basic: 100, full: 20 } as const;

const CreateBody = z.strictObject({
  path: z.string(),
  content: z.string().nullable(),
});

const UpdateBody = z.strictObject({
  content: z.string().nullable().optional(),
  path: z.string().nullable().optional(),
  precondition: z.strictObject({ type: z.literal('content_sha256'), content_sha256: z.string().optional() }).optional(),
});

const VIEWS = ['basic', 'full'] as const;

function access(state: EmulatorState, principal: Principal, storeId: string, mode: 'read' | 'write'): void {
  requireStoreAccess(principal, storeId, (sid) => state.attachment(sid, storeId)?.access, mode);
}

/** Create, list, retrieve, update and delete of `/v1/memory_stores/:id/memories`. */
export const memoryRoutes: Route[] = [
  {
    method: 'POST',
    template: '/v1/memory_stores/:id/memories',
    handler({ params, query, body, principal, state }) {
      const store = state.store(params['id']!);
      access(state, principal, store.id, 'write');
      const view = enumQuery(query, 'view', VIEWS) ?? 'basic';
      const parsed = parseBody(CreateBody, body, 'memory create body');
      const record = store.create(parsed.path, parsed.content ?? '');
      return { body: store.memoryObject(record, view) };
    },
  },
  {
    method: 'GET',
    template: '/v1/memory_stores/:id/memories',
    handler({ params, query, principal, state }) {
      const store = state.store(params['id']!);
      access(state, principal, store.id, 'read');
      const view: MemoryView = enumQuery(query, 'view', VIEWS) ?? 'basic';
      const limit = Math.min(intQuery(query, 'limit', { min: 1 }) ?? 20, PAGE_CAP[view]);
      const prefix = query.get('path_prefix') ?? '/';
      const problem = pathPrefixProblem(prefix);
      if (problem) throw invalidRequest(`path_prefix ${JSON.stringify(prefix)} ${problem}`);
      const depth = intQuery(query, 'depth', { min: 0, max: 20 }) ?? 0;
      const page = query.get('page');
      let afterPath: string | undefined;
      if (page) {
        const after = decodeCursor(page)['after'];
        if (typeof after !== 'string') throw invalidRequest(`page: ${JSON.stringify(page)} is not a memories cursor`);
        afterPath = after;
      }
      const { items, lastPath, more } = store.list({ prefix, depth, limit, view, ...(afterPath !== undefined ? { afterPath } : {}) });
      return { body: { data: items, next_page: more && lastPath !== undefined ? encodeCursor({ after: lastPath }) : null } };
    },
  },
  {
    method: 'GET',
    template: '/v1/memory_stores/:id/memories/:memoryId',
    handler({ params, query, principal, state }) {
      const store = state.store(params['id']!);
      access(state, principal, store.id, 'read');
      const view = enumQuery(query, 'view', VIEWS) ?? 'full';
      return { body: store.memoryObject(store.get(params['memoryId']!), view) };
    },
  },
  {
    method: 'POST',
    template: '/v1/memory_stores/:id/memories/:memoryId',
    handler({ params, query, body, principal, state }) {
      const store = state.store(params['id']!);
      access(state, principal, store.id, 'write');
      const view = enumQuery(query, 'view', VIEWS) ?? 'basic';
      const parsed = parseBody(UpdateBody, body, 'memory update body');
      if (parsed.precondition && parsed.precondition.content_sha256 === undefined) {
        throw invalidRequest('precondition.content_sha256 is required when a precondition is given');
      }
      const record = store.update(params['memoryId']!, {
        ...(parsed.content != null ? { content: parsed.content } : {}),
        ...(parsed.path != null ? { path: parsed.path } : {}),
        ...(parsed.precondition?.content_sha256 !== undefined ? { expectedSha256: parsed.precondition.content_sha256 } : {}),
      });
      return { body: store.memoryObject(record, view) };
    },
  },
  {
    method: 'DELETE',
    template: '/v1/memory_stores/:id/memories/:memoryId',
    handler({ params, query, principal, state }) {
      const store = state.store(params['id']!);
      access(state, principal, store.id, 'write');
      const expected = query.get('expected_content_sha256') ?? undefined;
      store.delete(params['memoryId']!, expected);
      return { body: { id: params['memoryId'], type: 'memory_deleted' } };
    },
  },
];
