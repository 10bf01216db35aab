/**
 * Which undici dispatcher a page request goes through, in order: the one the client's
 * `fetchOptions` carry; else the process's global dispatcher (what the runtime's `fetch` uses),
 * unless it is the option-less agent the runtime installs for itself; else the library's own agent
 * (`own-agent.ts`), which is never installed globally. So a proxy agent, an `Agent` trusting a
 * private CA or a `MockAgent` the app chose sees listing pages as it sees every other request.
 */
import type { Dispatcher } from 'undici';
import { isDefaultAgent, ownAgent } from './own-agent.js';

const GLOBAL_DISPATCHER = Symbol.for('undici.globalDispatcher.1');

/**
 * The dispatcher a request goes through: the client's; else the process's global one, unless that
 * is the default agent the runtime's `fetch` installs (no app chose it), for which the library's own
 * agent stands in; else the library's own.
 */
export function dispatcherFor(init: RequestInit | undefined): Dispatcher {
  const given = (init as { dispatcher?: unknown } | undefined)?.dispatcher;
  if (isDispatcher(given)) return given;
  const global = globalDispatcher();
  if (global === undefined) return ownAgent();
  return isDefaultAgent(global) ? ownAgent(global) : global;
}

/**
 * The process's global dispatcher, with the runtime's `fetch` machinery loaded first: loading it
 * installs the runtime's default agent when none is set, as the first `fetch` of any app does.
 */
function globalDispatcher(): Dispatcher | undefined {
  const read = (): unknown => (globalThis as Record<symbol, unknown>)[GLOBAL_DISPATCHER];
  let global = read();
  if (!isDispatcher(global)) {
    void globalThis.Response;
    global = read();
  }
  return isDispatcher(global) ? global : undefined;
}

function isDispatcher(value: unknown): value is Dispatcher {
  return typeof value === 'object' && value !== null && typeof (value as { dispatch?: unknown }).dispatch === 'function';
}
