import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from './usage-error.js';

type Options = NonNullable<ParseArgsConfig['options']>;

/** Parse `argv` strictly with `node:util` parseArgs, turning its errors into {@link UsageError}s. */
export function parseFlags<O extends Options>(
  command: string,
  argv: string[],
  options: O,
): ReturnType<typeof parseArgs<{ args: string[]; options: O; strict: true; allowPositionals: false }>> {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: false });
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    throw new UsageError(`${command}: ${message}. Run "managed-agents-worker ${command} --help" for the flags.`);
  }
}

/** An integer flag within [min, max]; `undefined` when the flag was not given. */
export function intFlag(flag: string, raw: string | undefined, min: number, max: number): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new UsageError(`--${flag}: expected an integer from ${min} to ${max}, got "${raw}"`);
  }
  return n;
}

/** A flag that must be one of `choices`; `undefined` when the flag was not given. */
export function choiceFlag<C extends string>(flag: string, raw: string | undefined, choices: readonly C[]): C | undefined {
  if (raw === undefined) return undefined;
  if (!(choices as readonly string[]).includes(raw)) {
    throw new UsageError(`--${flag}: expected one of ${choices.join(', ')}, got "${raw}"`);
  }
  return raw as C;
}

/** The first non-empty value among a flag and environment variables. */
export function firstSet(...values: Array<string | undefined>): string | undefined {
  return values.find((v) => v !== undefined && v !== '');
}
