import { apiErrorBody } from '../internal/logger.js';
import { RemoteApiError } from '../errors.js';

/**
 * How a failed API call should be treated.
 * - `fatal`: the same request will fail again (bad credential, unknown id, invalid input).
 * - `transient`: it may succeed later (timeouts, rate limits, 409 races, server errors, network).
 * - `aborted`: we cancelled it ourselves.
 */
export type FailureClass = 'fatal' | 'transient' | 'aborted';

/**
 * The fields of an `@anthropic-ai/sdk` API error that this library reads. Errors are recognised by
 * this shape and by their `name`, never with `instanceof`: the app may load another copy of the SDK
 * (another version, or a bundled one), whose error classes are distinct from the ones we import.
 */
export interface ApiErrorShape extends Error {
  /** HTTP status; undefined for network failures, our own aborts and stream error frames. */
  readonly status: number | undefined;
  /** The parsed JSON body of the error response, if any. */
  readonly error: unknown;
  readonly requestID?: string | null | undefined;
}

/** True for an error thrown by any copy of the SDK for a failed request (HTTP, network or abort). */
export function isApiError(e: unknown): e is ApiErrorShape {
  if (!(e instanceof Error) || !('status' in e) || !('headers' in e) || !('error' in e)) return false;
  return typeof e.status === 'number' || e.status === undefined;
}

/** True when the SDK gave up on the request because its signal aborted (our own cancellation). */
export function isUserAbortError(e: unknown): boolean {
  return isApiError(e) && e.name === 'APIUserAbortError';
}

/** True when no HTTP response arrived (connection refused or reset, DNS failure, client timeout). */
export function isConnectionError(e: unknown): boolean {
  return isApiError(e) && (e.name === 'APIConnectionError' || e.name === 'APIConnectionTimeoutError');
}

/** Classify anything a client call threw. */
export function classifyFailure(e: unknown): FailureClass {
  if (isUserAbortError(e)) return 'aborted';
  if (e instanceof Error && (e.name === 'AbortError' || e.name === 'TimeoutError')) return 'aborted';
  const status = statusOf(e);
  if (status === undefined) return 'transient';
  if (status === 408 || status === 409 || status === 429 || status >= 500) return 'transient';
  if (status >= 400) return 'fatal';
  return 'transient';
}

/** The HTTP status of an API error, or undefined for network failures and non-API errors. */
export function statusOf(e: unknown): number | undefined {
  return isApiError(e) && typeof e.status === 'number' ? e.status : undefined;
}

/** The `error.type` of an API error body (`memory_precondition_failed_error`, …), if any. */
export function errorTypeOf(e: unknown): string | undefined {
  if (!isApiError(e)) return undefined;
  const body = e.error as { error?: { type?: unknown } } | undefined;
  const t = body?.error?.type;
  return typeof t === 'string' ? t : undefined;
}

/** Convert a client failure into our typed error, keeping status and request id; never the credential. */
export function toRemoteApiError(e: unknown, what: string): RemoteApiError {
  const status = statusOf(e);
  const requestId = isApiError(e) && typeof e.requestID === 'string' ? e.requestID : undefined;
  // An API error's message holds its status and whole body: state the body's type and message once.
  const detail = apiErrorBody(e) ?? (e instanceof Error ? e.message : String(e));
  return new RemoteApiError(
    `${what} failed${status !== undefined ? ` with HTTP ${status}` : ''}: ${detail}`,
    { status, requestId, retryable: classifyFailure(e) === 'transient' },
    { cause: e },
  );
}
