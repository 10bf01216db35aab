import type Anthropic from '@anthropic-ai/sdk';
import { withBufferedPosts } from '../api/buffered-fetch.js';
import { InternalError } from '../errors.js';

/**
 * Most bytes read of the answer to one post. A tool result's answer echoes the event sent, and the
 * runtime's `fetch` would read any size; this only stops a runaway answer.
 */
const MAX_POST_ANSWER_BYTES = 64 * 1024 * 1024;

/**
 * A copy of the caller's client that authenticates with `credential` only (as a Bearer token): the
 * API key is cleared, and the base URL, timeouts, retries and fetch settings are inherited. Every
 * per-item call (heartbeat, session, events, skills, memory, stop) and every poll goes through one.
 */
export function scopedClient(client: Anthropic, credential: string): Anthropic {
  if (credential === '') throw new InternalError('scopedClient: an empty credential cannot authenticate anything');
  return client.withOptions({ apiKey: null, authToken: credential, baseURL: client.baseURL });
}

/**
 * `client`, or a copy of it whose posts (tool results, acknowledgements, heartbeats, stops) go over
 * the buffered transport while its reads (the event stream, the history, listings) stay on its own
 * `fetch`; only when the client uses the runtime's default transport (see `withBufferedPosts`).
 */
export function postingClient(client: Anthropic): Anthropic {
  return withBufferedPosts(client, MAX_POST_ANSWER_BYTES);
}
