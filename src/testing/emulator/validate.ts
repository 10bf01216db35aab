import { z } from 'zod';
import { invalidRequest } from './errors.js';

/**
 * Parse a request body with a zod schema; a mismatch becomes the API's 400
 * `invalid_request_error` with one `field: problem` clause per issue.
 */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown, what: string): z.output<S> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const field = issue.path.length > 0 ? issue.path.join('.') : '(body)';
    return `${field}: ${issue.message}`;
  });
  throw invalidRequest(`invalid ${what}: ${problems.join('; ')}`);
}

/** An optional integer query parameter within [min, max]; 400 naming the parameter otherwise. */
export function intQuery(query: URLSearchParams, name: string, opts: { min: number; max?: number }): number | undefined {
  const raw = query.get(name);
  if (raw === null || raw === '') return undefined;
  if (!/^-?\d+$/.test(raw)) throw invalidRequest(`${name}: expected an integer, got ${JSON.stringify(raw)}`);
  const value = Number(raw);
  if (value < opts.min || (opts.max !== undefined && value > opts.max)) {
    const range = opts.max !== undefined ? `between ${opts.min} and ${opts.max}` : `at least ${opts.min}`;
    throw invalidRequest(`${name}: must be ${range}, got ${value}`);
  }
  return value;
}

/** An optional enum query parameter; 400 naming the allowed values otherwise. */
export function enumQuery<T extends string>(query: URLSearchParams, name: string, allowed: readonly T[]): T | undefined {
  const raw = query.get(name);
  if (raw === null || raw === '') return undefined;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw invalidRequest(`${name}: expected one of ${allowed.join(', ')}, got ${JSON.stringify(raw)}`);
  }
  return raw as T;
}

/** An optional boolean query parameter (`true`/`false`). */
export function boolQuery(query: URLSearchParams, name: string): boolean | undefined {
  const raw = query.get(name);
  if (raw === null || raw === '') return undefined;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  throw invalidRequest(`${name}: expected true or false, got ${JSON.stringify(raw)}`);
}

/** Encode an opaque page cursor. */
export function encodeCursor(value: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

/** Decode a page cursor made by {@link encodeCursor}; 400 when it is not one. */
export function decodeCursor(raw: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
      return parsed as Record<string, unknown>;
    }
  } catch {
    // fall through to the 400 below
  }
  throw invalidRequest(`page: ${JSON.stringify(raw)} is not a cursor this server issued; pass next_page unchanged`);
}
