import { createLogger, type Logger } from '../internal/logger.js';
import type { CliIo } from './io.js';
import pino from 'pino';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * The CLI's logger: JSON lines on stderr (stdout stays free for command output), with the library's
 * redaction paths. `pretty` switches to pino-pretty when it is installed; when it is not, the CLI
 * says how to install it and keeps JSON.
 */
export async function cliLogger(opts: { level: LogLevel; pretty: boolean; io: CliIo }): Promise<Logger> {
  if (opts.pretty) {
    const pretty = await loadPinoPretty();
    if (pretty) return createLogger({ level: opts.level }, pretty({ destination: 2, sync: true, colorize: process.stderr.isTTY }));
    opts.io.stderr('managed-agents-worker: --pretty needs pino-pretty: npm install pino-pretty (logging JSON instead)\n');
  }
  return createLogger({ level: opts.level }, pino.destination({ fd: 2, sync: true }));
}

type PrettyFactory = (opts: { destination: number; sync: boolean; colorize: boolean }) => pino.DestinationStream;

async function loadPinoPretty(): Promise<PrettyFactory | undefined> {
  // A variable module name keeps bundlers and the type checker from requiring the optional package.
  const name = 'pino-pretty';
  try {
    const mod = (await import(name)) as { default?: PrettyFactory } & PrettyFactory;
    return typeof mod.default === 'function' ? mod.default : mod;
  } catch {
    return undefined;
  }
}
