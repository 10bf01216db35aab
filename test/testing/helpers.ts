/** Shared helpers of the emulator's own tests. */
import { APIError } from '@anthropic-ai/sdk';
import { expect } from 'vitest';

/** Await `p`, expecting the SDK to throw an APIError with this status and `error.type`. */
export async function expectApiError(p: Promise<unknown>, status: number, type?: string): Promise<APIError> {
  let caught: unknown;
  try {
    await p;
  } catch (e) {
    caught = e;
  }
  expect(caught, `expected a ${status} APIError`).toBeInstanceOf(APIError);
  const err = caught as APIError;
  expect(err.status).toBe(status);
  if (type !== undefined) expect((err.error as { error?: { type?: string } } | undefined)?.error?.type).toBe(type);
  return err;
}

/** The `error` object of an APIError's body. */
export function errorBody(err: APIError): Record<string, unknown> {
  return ((err.error as { error?: Record<string, unknown> } | undefined)?.error ?? {}) as Record<string, unknown>;
}

export { sdkAtLeast } from '../sdk-version.js';
