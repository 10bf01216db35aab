import type Anthropic from '@anthropic-ai/sdk';
import { InternalError } from '../errors.js';

/**
 * A copy of the caller's client that authenticates with `credential` only (as a Bearer token): the
 * API key is cleared, and the base URL, timeouts, retries and fetch settings are inherited. Every
 * per-item call (heartbeat, session, events, skills, memory, stop) and every poll goes through one.
 */
export function scopedClient(client: Anthropic, credential: string): Anthropic {
  if (credential === '') throw new InternalError('scopedClient: an empty credential cannot authenticate anything');
  return client.withOptions({ apiKey: null, authToken: credential, baseURL: client.baseURL });
}
