import type { z } from 'zod/v3';
import { ConfigError } from '../errors.js';

/**
 * Parse an options object with a strict zod schema and turn every problem into one line of a single
 * {@link ConfigError}: `key: expected …, got …` for a bad value, `key: unknown option; accepted
 * options are …` for a key the schema does not know. A value listed in `secretKeys` is never echoed,
 * only its type, nor is it shown where it appears inside another option's value.
 */
export function parseOptions<S extends z.ZodType>(
  schema: S,
  input: unknown,
  spec: {
    /** Who owns the options, for the message: `Launcher`, `createWebhookHandler`. */
    owner: string;
    /** What each option accepts, in words (`an integer from 1 to 256`). Its keys are the accepted options. */
    expected: Readonly<Record<string, string>>;
    /** Options whose value never appears in a message. */
    secretKeys?: ReadonlySet<string>;
    /** The environment variable an app usually reads each option from, named when the value is missing. */
    variables?: Readonly<Record<string, string>>;
  },
): z.output<S> {
  if (!isObject(input)) {
    const line = `options: expected an object, got ${describeValue(input, false)}`;
    throw new ConfigError(`invalid ${spec.owner} options:\n  ${line}`, [line]);
  }
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  // A secret may also sit inside another option's value (a key pasted into a command): mask it
  // there before the value is shortened, so not even a prefix shows.
  const secrets = [...(spec.secretKeys ?? [])].map((k) => input[k]).filter((v): v is string => typeof v === 'string' && v.length > 0);
  const render = (key: string): string => {
    const v = input[key];
    if (spec.secretKeys?.has(key) || typeof v !== 'string') return describeValue(v, spec.secretKeys?.has(key) ?? false);
    return describeValue(
      secrets.reduce((text, secret) => text.split(secret).join('<redacted>'), v),
      false,
    );
  };
  const issues: string[] = [];
  const seen = new Set<string>();
  for (const issue of parsed.error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        issues.push(`${key}: unknown option; accepted options are ${Object.keys(spec.expected).join(', ')}`);
      }
      continue;
    }
    const key = String(issue.path[0] ?? 'options');
    // A refinement's own message says what is wrong with one element: one line each.
    const detail = issue.code === 'custom' && issue.message && !issue.message.startsWith('Invalid') ? `: ${issue.message}` : '';
    const line = `${key}: expected ${spec.expected[key] ?? issue.message}, got ${render(key)}${missingVariableHint(input[key], spec.variables?.[key])}`;
    if (seen.has(line + detail) || (detail === '' && seen.has(key))) continue;
    seen.add(key);
    seen.add(line + detail);
    issues.push(line + detail);
  }
  throw new ConfigError(`invalid ${spec.owner} options:\n  ${issues.join('\n  ')}`, issues);
}

/** ` (is VAR set?)` after a missing value that apps read from the variable VAR, else nothing. */
export function missingVariableHint(value: unknown, variable: string | undefined): string {
  return variable !== undefined && (value === undefined || value === '') ? ` (is ${variable} set?)` : '';
}

/** A short rendering of a received value; a secret shows only its type. */
export function describeValue(v: unknown, secret: boolean): string {
  if (v === undefined) return 'undefined';
  if (v === null) return 'null';
  if (secret) return typeof v === 'string' ? (v === '' ? 'an empty string' : 'a string') : typeof v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? `${v.slice(0, 57)}...` : v);
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'function') return 'a function';
  return typeof v === 'object' ? 'an object' : typeof v;
}

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const isFunction = (v: unknown): boolean => typeof v === 'function';

/** An SDK client by shape (the app may hold another copy of the SDK, so no `instanceof`). */
export function looksLikeClient(v: unknown): boolean {
  if (!isObject(v) || !isFunction(v['withOptions'])) return false;
  const beta = v['beta'];
  return isObject(beta) && isObject(beta['environments']) && isObject(beta['sessions']);
}

/** A pino-like logger. */
export function looksLikeLogger(v: unknown): boolean {
  return isObject(v) && ['child', 'info', 'warn', 'error', 'debug'].every((k) => isFunction(v[k]));
}
