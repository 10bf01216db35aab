/**
 * The per-item credential. A work item's `secret` is base64url (padding optional) of a UTF-8 JSON
 * object whose `sessions_token` scopes every session and memory call of that item. The secret and
 * the token are credentials: nothing here logs them or puts them in an error message.
 */

/**
 * Why a secret yielded no token: absent, or present but unusable.
 * @inline
 */
export type SecretStatus = 'token' | 'absent' | 'malformed';

/**
 * What {@link decodeWorkSecret} found in a work item's secret.
 * @inline
 */
export interface DecodedSecret {
  /** `token` when the secret yielded a sessions token; `absent` or `malformed` when it did not. */
  status: SecretStatus;
  /** The sessions token, or null when the secret is absent or malformed. */
  sessionsToken: string | null;
}

/** Decode a work item's secret. Never throws. */
export function decodeWorkSecret(secret: string | null | undefined): DecodedSecret {
  if (secret === undefined || secret === null || secret === '') return { status: 'absent', sessionsToken: null };
  const malformed: DecodedSecret = { status: 'malformed', sessionsToken: null };
  const compact = secret.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(compact)) return malformed;
  let parsed: unknown;
  try {
    const text = Buffer.from(compact.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('utf8');
    parsed = JSON.parse(text);
  } catch {
    return malformed;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return malformed;
  const token = (parsed as Record<string, unknown>)['sessions_token'];
  if (typeof token !== 'string' || token === '') return malformed;
  return { status: 'token', sessionsToken: token };
}

/** Encode a secret the way the API issues it (tests and the emulator's peers use it). */
export function encodeWorkSecret(payload: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url');
}
