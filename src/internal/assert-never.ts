import { InternalError } from '../errors.js';

/**
 * The end of an exhaustive switch: the compiler refuses a call here while a case is unhandled,
 * and reaching it at run time means a value outside its declared type (a bug), named in the error.
 */
export function assertNever(value: never): never {
  throw new InternalError(`unhandled case: ${JSON.stringify(value)}`);
}
