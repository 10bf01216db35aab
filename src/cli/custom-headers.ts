import { ConfigError } from '../errors.js';

/**
 * Extra request headers for every API call, one `Name: value` per line. Gateways and proxies put
 * their authorisation here, so the CLI treats the variable as a credential: read once at start,
 * removed from the process environment, and handed to the clients it builds as `defaultHeaders`.
 */
export const CUSTOM_HEADERS_VARIABLE = 'ANTHROPIC_CUSTOM_HEADERS';

/** An HTTP header name (a token: letters, digits and ``!#$%&'*+-.^_`|~``). */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * The headers {@link CUSTOM_HEADERS_VARIABLE} lists in `env`, or `undefined` when it is unset or
 * blank. Blank lines are skipped; a line without a colon or with an invalid name is refused with a
 * message that gives its line number and never its content.
 */
export function customHeadersFrom(env: NodeJS.ProcessEnv): Record<string, string> | undefined {
  const text = env[CUSTOM_HEADERS_VARIABLE];
  if (text === undefined || text.trim() === '') return undefined;
  const headers: Record<string, string> = {};
  text.split(/\r?\n/).forEach((line, index) => {
    if (line.trim() === '') return;
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon).trim() : '';
    if (!HEADER_NAME.test(name)) {
      throw new ConfigError(
        `${CUSTOM_HEADERS_VARIABLE} line ${index + 1}: expected "Name: value" with a header name before the colon; write one header per line`,
      );
    }
    headers[name] = line.slice(colon + 1).trim();
  });
  return headers;
}

/** The client option carrying `headers`, or nothing when there are none. */
export function headersOption(headers: Record<string, string> | undefined): { defaultHeaders?: Record<string, string> } {
  return headers ? { defaultHeaders: headers } : {};
}
