import type Anthropic from '@anthropic-ai/sdk';
import { InternalError } from '../errors.js';

/** Header names that carry a credential: an item's calls carry its own, never the app's. */
const CREDENTIAL_HEADERS = new Set(['authorization', 'x-api-key']);

/**
 * A copy of the caller's client that authenticates with `credential` only (as a Bearer token): the
 * API key is cleared, an `Authorization` or `X-Api-Key` among the client's default headers is
 * dropped (the SDK sends default headers after its own credential, so one there would replace the
 * item's token or travel beside it), and the base URL, other default headers, timeouts, retries
 * and the transport (`fetch`, `fetchOptions`) are inherited. Every per-item call (heartbeat,
 * session, events, skills, memory, stop) and every poll goes through one.
 */
export function scopedClient(client: Anthropic, credential: string): Anthropic {
  if (credential === '') throw new InternalError('scopedClient: an empty credential cannot authenticate anything');
  const headers = defaultHeadersWithoutCredentials(client);
  return client.withOptions({
    apiKey: null,
    authToken: credential,
    baseURL: client.baseURL,
    ...(headers !== undefined ? { defaultHeaders: headers } : {}),
  });
}

/**
 * The client's default headers less its credential headers, or undefined when it has none to drop.
 * The SDK keeps the options a client was built with on `_options` (a member its types mark
 * protected; `test/worker/scoped-client.test.ts` fails if it goes, as a credential header would then
 * travel with every item's calls).
 */
function defaultHeadersWithoutCredentials(client: Anthropic): Record<string, string | null> | undefined {
  const given = (client as unknown as { _options?: { defaultHeaders?: unknown } })._options?.defaultHeaders;
  if (given === undefined || given === null) return undefined;
  const out: Record<string, string | null> = {};
  let dropped = false;
  for (const [name, value] of headerEntries(given)) {
    if (CREDENTIAL_HEADERS.has(name.toLowerCase())) dropped = true;
    else out[name] = value;
  }
  return dropped ? out : undefined;
}

/** The entries of any header shape the SDK accepts (a record, a `Headers`, an array of pairs). */
function headerEntries(given: unknown): Array<[string, string | null]> {
  if (given instanceof Headers) return [...given.entries()];
  if (Array.isArray(given)) {
    return given.filter((e): e is [string, string] => Array.isArray(e) && typeof e[0] === 'string').map(([k, v]) => [k, String(v)]);
  }
  if (typeof given !== 'object') return [];
  const out: Array<[string, string | null]> = [];
  for (const [name, value] of Object.entries(given as Record<string, unknown>)) {
    if (value === undefined) continue;
    if (value === null) out.push([name, null]);
    else if (Array.isArray(value)) for (const v of value) out.push([name, String(v)]);
    else out.push([name, String(value)]);
  }
  return out;
}
