import type { IncomingHttpHeaders } from 'node:http';
import { ApiError, permissionDenied } from './errors.js';

/** What kind of credential a request carried (the request log records this, never the secret). */
export type CredentialKind = 'console' | 'environment_key' | 'sessions_token' | 'none' | 'unknown';

/** Who is calling: the credential kind and what it is scoped to. */
export interface Principal {
  kind: CredentialKind;
  /** Environment of an environment key or sessions token. */
  environmentId?: string;
  /** Work item of a sessions token. */
  workId?: string;
  /** Session of a sessions token. */
  sessionId?: string;
}

/** Read the bearer credential from `Authorization: Bearer …` or `x-api-key`. */
export function credentialOf(headers: IncomingHttpHeaders): string | undefined {
  const auth = headers['authorization'];
  if (typeof auth === 'string') {
    const match = /^Bearer\s+(.+)$/i.exec(auth.trim());
    if (match?.[1]) return match[1].trim();
  }
  const apiKey = headers['x-api-key'];
  if (typeof apiKey === 'string' && apiKey.trim() !== '') return apiKey.trim();
  return undefined;
}

/** Every credential the emulator issued, looked up by value. */
export class CredentialRegistry {
  readonly #byValue = new Map<string, Principal>();

  add(value: string, principal: Principal): void {
    this.#byValue.set(value, principal);
  }

  classify(headers: IncomingHttpHeaders): Principal {
    const value = credentialOf(headers);
    if (value === undefined) return { kind: 'none' };
    return this.#byValue.get(value) ?? { kind: 'unknown' };
  }
}

/** 401 for a request without a credential the emulator issued. */
export function unauthenticated(principal: Principal): ApiError {
  return new ApiError(
    401,
    'authentication_error',
    principal.kind === 'none'
      ? 'no credential: send Authorization: Bearer <key> (or x-api-key)'
      : 'invalid credential: the key is not one this server issued',
  );
}

/** Only the console (API key) credential may do this. */
export function requireConsole(principal: Principal, action: string): void {
  if (principal.kind !== 'console') {
    throw permissionDenied(`${action} needs an API key; a ${describe(principal)} may not do this`);
  }
}

/** Console, the environment's key, or the item's own sessions token. */
export function requireWorkAccess(principal: Principal, item: { id: string; environmentId: string }): void {
  if (principal.kind === 'console') return;
  if (principal.kind === 'environment_key' && principal.environmentId === item.environmentId) return;
  if (principal.kind === 'sessions_token' && principal.workId === item.id) return;
  throw permissionDenied(`a ${describe(principal)} may not act on work item ${item.id}`);
}

/** Console, the session environment's key, or a sessions token issued for this session. */
export function requireSessionAccess(principal: Principal, session: { id: string; environmentId: string }): void {
  if (principal.kind === 'console') return;
  if (principal.kind === 'environment_key' && principal.environmentId === session.environmentId) return;
  if (principal.kind === 'sessions_token' && principal.sessionId === session.id) return;
  throw permissionDenied(`a ${describe(principal)} may not access session ${session.id}`);
}

function describe(principal: Principal): string {
  switch (principal.kind) {
    case 'console':
      return 'API key';
    case 'environment_key':
      return `environment key (of ${principal.environmentId})`;
    case 'sessions_token':
      return `sessions token (of session ${principal.sessionId})`;
    default:
      return 'missing or unknown credential';
  }
}

/**
 * Memory endpoints: the API key, or a sessions token whose session has the store attached
 * (writes also need `read_write` access). The environment key is always refused.
 */
export function requireStoreAccess(
  principal: Principal,
  storeId: string,
  attachmentAccess: (sessionId: string | undefined) => 'read_write' | 'read_only' | undefined,
  mode: 'read' | 'write',
): void {
  if (principal.kind === 'console') return;
  if (principal.kind === 'environment_key') {
    throw permissionDenied('the memory endpoints do not accept the environment key; use the sessions token from the work item secret');
  }
  if (principal.kind === 'sessions_token') {
    const access = attachmentAccess(principal.sessionId);
    if (access === undefined) {
      throw permissionDenied(`memory store ${storeId} is not attached to session ${principal.sessionId}`);
    }
    if (mode === 'write' && access === 'read_only') {
      throw permissionDenied(`memory store ${storeId} is attached read_only to session ${principal.sessionId}`);
    }
    return;
  }
  throw permissionDenied(`a missing or unknown credential may not access memory store ${storeId}`);
}

/**
 * Skills routes: the API key, any environment key the emulator issued (skills belong to the
 * organization), or a sessions token whose session's agent carries the skill.
 */
export function requireSkillAccess(principal: Principal, skillId: string, agentSkillIds: (sessionId: string) => readonly string[]): void {
  if (principal.kind === 'console' || principal.kind === 'environment_key') return;
  if (principal.kind === 'sessions_token' && principal.sessionId !== undefined && agentSkillIds(principal.sessionId).includes(skillId))
    return;
  throw permissionDenied(`a ${describe(principal)} may not read skill ${skillId}: it is not among the skills of that session's agent`);
}
