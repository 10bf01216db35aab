import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * Paths pino censors in every line, whatever the caller logs. A safety net only: code never puts
 * credentials in bindings or fields in the first place.
 */
export const REDACT_PATHS: readonly string[] = [
  'token',
  'secret',
  'authToken',
  'apiKey',
  'environmentKey',
  'workSecret',
  'sessionsToken',
  '*.token',
  '*.secret',
  '*.authToken',
  '*.apiKey',
  '*.environmentKey',
  '*.workSecret',
  '*.sessionsToken',
  '*.sessions_token',
  'headers.authorization',
  'headers["x-api-key"]',
  '*.headers.authorization',
  '*.headers["x-api-key"]',
];

/**
 * The logger the library writes to: the caller's own pino logger, or a default one that prints
 * `warn` and above to stderr with the redaction paths set.
 */
export function resolveLogger(logger?: Logger): Logger {
  if (logger) return logger;
  return pino(
    {
      name: 'managed-agents-worker',
      level: process.env['MAW_LOG_LEVEL'] ?? 'warn',
      redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
    },
    pino.destination(2),
  );
}

/** Build a pino logger with our redaction settings on top of the given options and destination. */
export function createLogger(options: pino.LoggerOptions = {}, destination?: pino.DestinationStream): Logger {
  const merged: pino.LoggerOptions = {
    name: 'managed-agents-worker',
    level: 'info',
    ...options,
    redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
  };
  return destination ? pino(merged, destination) : pino(merged);
}

/** An error as a log field without its stack: what an operator needs to act on an expected failure. */
export interface ErrorSummary {
  type: string;
  message: string;
  code?: string;
  status?: number;
  request_id?: string;
}

/**
 * The `error` field for a failure this library expects and handles (a network error, an HTTP
 * status, an abort): type, one-line message, code, HTTP status and request id, with no stack and
 * no cause chain, so a failed poll costs one short line. Log the error itself under `err` at
 * `debug` next to it when its stack may help. (Under `err`, pino's error serializer would add a
 * `stack` to it.) An API error's body is shown once, as `<error type>: <message>`. Errors are read
 * by shape, never by class: the app may hold another copy of the SDK.
 */
export function errorSummary(e: unknown): ErrorSummary {
  if (!(e instanceof Error)) return { type: typeof e, message: String(e) };
  const fields = e as Error & { code?: unknown; status?: unknown; requestID?: unknown; requestId?: unknown };
  const summary: ErrorSummary = { type: e.name === 'Error' ? e.constructor.name : e.name, message: oneLine(e) };
  if (typeof fields.code === 'string') summary.code = fields.code;
  if (typeof fields.status === 'number') summary.status = fields.status;
  const requestId = typeof fields.requestID === 'string' ? fields.requestID : fields.requestId;
  if (typeof requestId === 'string') summary.request_id = requestId;
  return summary;
}

/** Most causes one summary follows. */
const MAX_CAUSES = 3;

/** The message of `e`, an API body shown as `<status> <type>: <message>`, then the messages of its causes. */
function oneLine(e: Error): string {
  const parts: string[] = [];
  let current: unknown = e;
  for (let depth = 0; current instanceof Error && depth <= MAX_CAUSES; depth++) {
    // A wrapper often repeats what its cause says: keep each text once.
    const core = apiErrorBody(current) ?? current.message;
    if (core && !parts.some((p) => p.includes(core))) parts.push(apiErrorText(current) ?? current.message);
    current = (current as { cause?: unknown }).cause;
  }
  return parts.join(': ');
}

/** `<status> <error type>: <message>` for an SDK API error with the API's error body, else undefined. */
export function apiErrorText(e: unknown): string | undefined {
  const body = apiErrorBody(e);
  return body === undefined ? undefined : `${(e as { status: number }).status} ${body}`;
}

/** `<error type>: <message>` from the API's error body of an SDK API error, else undefined. */
export function apiErrorBody(e: unknown): string | undefined {
  const { status, error } = (e ?? {}) as { status?: unknown; error?: unknown };
  const body = (error as { error?: { type?: unknown; message?: unknown } } | undefined)?.error;
  if (typeof status !== 'number' || typeof body?.message !== 'string') return undefined;
  return `${typeof body.type === 'string' ? `${body.type}: ` : ''}${body.message}`;
}

/**
 * A child of `log` bound to `bindings`, leaving out each key `log` already binds to the same value:
 * pino writes a key bound twice twice, so a line would carry two `session_id`s when the worker's
 * item logger is passed to the memory core.
 */
export function childLogger(log: Logger, bindings: Record<string, unknown>): Logger {
  const bound = typeof log.bindings === 'function' ? log.bindings() : {};
  const fresh: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(bindings)) {
    if (!(key in bound) || bound[key] !== value) fresh[key] = value;
  }
  return log.child(fresh);
}

/** `fields` with each camelCase key written in snake_case (`localDeletes` → `local_deletes`), for logging a report object. */
export function snakeCaseKeys(fields: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) out[key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = value;
  return out;
}
