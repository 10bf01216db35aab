import { APIError, APIConnectionError, APIUserAbortError } from '@anthropic-ai/sdk';
import { RemoteApiError } from '../errors.js';

/**
 * How a failed API call should be treated.
 * - `fatal`: the same request will fail again (bad credential, unknown id, invalid input).
 * - `transient`: it may succeed later (timeouts, rate limits, 409 races, server errors, network).
 * - `aborted`: we cancelled it ourselves.
 */
export type FailureClass = 'fatal' | 'transient' | 'aborted';

/** Classify anything a client call threw. */
export function classifyFailure(e: unknown): FailureClass {
  if (e instanceof APIUserAbortError) return 'aborted';
  if (e instanceof Error && (e.name === 'AbortError' || e.name === 'TimeoutError')) return 'aborted';
  const status = statusOf(e);
  if (status === undefined) return 'transient';
  if (status === 408 || status === 409 || status === 429 || status >= 500) return 'transient';
  if (status >= 400) return 'fatal';
  return 'transient';
}

/** The HTTP status of an API error, or undefined for network failures and non-API errors. */
export function statusOf(e: unknown): number | undefined {
  if (e instanceof APIConnectionError) return undefined;
  if (e instanceof APIError && typeof e.status === 'number') return e.status;
  return undefined;
}

/** The `error.type` of an API error body (`memory_precondition_failed_error`, …), if any. */
export function errorTypeOf(e: unknown): string | undefined {
  if (!(e instanceof APIError)) return undefined;
  const body = e.error as { error?: { type?: unknown } } | undefined;
  const t = body?.error?.type;
  return typeof t === 'string' ? t : undefined;
}

/** Convert a client failure into our typed error, keeping status and request id; never the credential. */
export function toRemoteApiError(e: unknown, what: string): RemoteApiError {
  const status = statusOf(e);
  const requestId = e instanceof APIError ? (e.requestID ?? undefined) : undefined;
  const detail = e instanceof Error ? e.message : String(e);
  return new RemoteApiError(
    `${what} failed${status !== undefined ? ` with HTTP ${status}` : ''}: ${detail}`,
    { status, requestId, retryable: classifyFailure(e) === 'transient' },
    { cause: e },
  );
}
