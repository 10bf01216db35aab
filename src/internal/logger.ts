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
  return pino({
    name: 'managed-agents-worker',
    level: process.env['MAW_LOG_LEVEL'] ?? 'warn',
    redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
  }, pino.destination(2));
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
