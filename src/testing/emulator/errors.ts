/**
 * API errors the emulator answers with, in the wire envelope of the Anthropic API:
 * `{"type":"error","error":{"type","message",...},"request_id"}`.
 */

/** The `error.type` values the emulator emits (a subset of the SDK's union, plus 413's). */
export type ApiErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'rate_limit_error'
  | 'api_error'
  | 'overloaded_error'
  | 'timeout_error'
  | 'conflict_error'
  | 'memory_precondition_failed_error'
  | 'memory_path_conflict_error';

export interface ApiErrorInit {
  /** Extra fields placed inside the envelope's `error` object (e.g. `conflicting_path`). */
  fields?: Record<string, unknown>;
  /** `error.details` (e.g. `{ error_code, current_state }`). */
  details?: Record<string, unknown>;
  /**
   * Value of the `x-should-retry` response header. Deterministic conflicts send `false` so the
   * SDK does not spend two retries on an answer that cannot change.
   */
  shouldRetry?: boolean;
}

/** Thrown by route handlers and models; the server turns it into the error envelope. */
export class ApiError extends Error {
  readonly status: number;
  readonly type: ApiErrorType;
  readonly fields: Record<string, unknown>;
  readonly details: Record<string, unknown> | undefined;
  readonly shouldRetry: boolean | undefined;

  constructor(status: number, type: ApiErrorType, message: string, init: ApiErrorInit = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.type = type;
    this.fields = init.fields ?? {};
    this.details = init.details;
    this.shouldRetry = init.shouldRetry;
  }

  /** The JSON body for this error, carrying the request id of the request it answers. */
  toBody(requestId: string): Record<string, unknown> {
    return {
      type: 'error',
      error: {
        type: this.type,
        message: this.message,
        ...this.fields,
        ...(this.details !== undefined ? { details: this.details } : {}),
      },
      request_id: requestId,
    };
  }
}

/** 400 `invalid_request_error`. */
export function invalidRequest(message: string, init?: ApiErrorInit): ApiError {
  return new ApiError(400, 'invalid_request_error', message, init);
}

/** 404 `not_found_error`. */
export function notFound(message: string): ApiError {
  return new ApiError(404, 'not_found_error', message);
}

/** 403 `permission_error`. */
export function permissionDenied(message: string): ApiError {
  return new ApiError(403, 'permission_error', message);
}

/** 409 `conflict_error` that the SDK should not retry. */
export function conflict(message: string, init?: ApiErrorInit): ApiError {
  return new ApiError(409, 'conflict_error', message, { shouldRetry: false, ...init });
}

/** The `error.type` the API uses for a bare HTTP status (fault injection picks it from here). */
export function errorTypeForStatus(status: number): ApiErrorType {
  switch (status) {
    case 400:
    case 412:
    case 422:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 408:
    case 504:
      return 'timeout_error';
    case 409:
      return 'conflict_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 529:
      return 'overloaded_error';
    default:
      return 'api_error';
  }
}
