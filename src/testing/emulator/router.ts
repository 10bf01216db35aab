import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Principal } from './auth.js';
import type { EmulatorState } from './state.js';

/** What a route handler gets. */
export interface RouteContext {
  method: string;
  path: string;
  params: Record<string, string>;
  query: URLSearchParams;
  body: unknown;
  principal: Principal;
  state: EmulatorState;
  requestId: string;
  req: IncomingMessage;
  res: ServerResponse;
  /** Aborted when the client goes away or the emulator closes. */
  signal: AbortSignal;
  /** Headers every answer carries (`request-id`); a streaming handler passes them to `writeHead`. */
  headers: Record<string, string>;
}

/** `body` is JSON-encoded, except a `Buffer`, which is sent as is (set its `content-type` in `headers`). */
export type RouteResult = { status?: number; body: unknown; headers?: Record<string, string> } | { streamed: true };

export interface Route {
  method: 'GET' | 'POST' | 'DELETE';
  /** Path template with `:name` parameters, e.g. `/v1/memory_stores/:id/memories`. */
  template: string;
  handler: (ctx: RouteContext) => RouteResult | Promise<RouteResult>;
}

interface Compiled {
  route: Route;
  pattern: RegExp;
  names: string[];
}

/** Matches a method + path against the route table, first match wins (literals before params). */
export class Router {
  readonly #compiled: Compiled[] = [];

  add(...routes: Route[]): void {
    for (const route of routes) {
      const names: string[] = [];
      const source = route.template
        .split('/')
        .map((segment) => {
          if (!segment.startsWith(':')) return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
          names.push(segment.slice(1));
          return '([^/]+)';
        })
        .join('/');
      this.#compiled.push({ route, pattern: new RegExp(`^${source}$`), names });
    }
    // Literal segments beat parameters: `/work/poll` must not match `/work/:workId`.
    this.#compiled.sort((a, b) => specificity(b.route.template) - specificity(a.route.template));
  }

  match(method: string, path: string): { route: Route; params: Record<string, string> } | undefined {
    for (const { route, pattern, names } of this.#compiled) {
      if (route.method !== method) continue;
      const m = pattern.exec(path);
      if (!m) continue;
      const params: Record<string, string> = {};
      names.forEach((name, i) => {
        params[name] = decodeURIComponent(m[i + 1] ?? '');
      });
      return { route, params };
    }
    return undefined;
  }
}

function specificity(template: string): number {
  const segments = template.split('/');
  // More segments first, then more literal segments.
  return segments.length * 100 + segments.filter((s) => !s.startsWith(':')).length;
}
