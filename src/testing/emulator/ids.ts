import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/** A random base58-ish string of `length` characters. */
export function randomToken(length: number): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const b of bytes) out += ALPHABET[b % ALPHABET.length];
  return out;
}

/** An id shaped like the API's (`sesn_011C…`): prefix, `011C`, 20 random characters. */
export function newId(prefix: string): string {
  return `${prefix}_011C${randomToken(20)}`;
}

/** RFC 3339 timestamp for `ms` (defaults to now). */
export function isoTime(ms: number = Date.now()): string {
  return new Date(ms).toISOString();
}
