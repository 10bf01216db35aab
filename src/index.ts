export * from './errors.js';
export { createLogger, REDACT_PATHS } from './internal/logger.js';
