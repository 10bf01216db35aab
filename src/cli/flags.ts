import { InvalidArgumentError } from 'commander';
import { ConfigError } from '../errors.js';
import { UsageError } from './usage-error.js';

/** A commander argument parser for an integer flag within [min, max]. */
export function intArg(min: number, max: number): (raw: string) => number {
  return (raw) => {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max}.`);
    }
    return n;
  };
}

/** A commander argument parser for a repeatable flag: each occurrence adds its value. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** A value taken from an environment variable that must be one of `choices`; `undefined` when unset. */
export function choiceFromEnv<C extends string>(variable: string, raw: string | undefined, choices: readonly C[]): C | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (!(choices as readonly string[]).includes(raw)) {
    throw new UsageError(`${variable}: expected one of ${choices.join(', ')}, got "${raw}"`);
  }
  return raw as C;
}

/** The first non-empty value among a flag and environment variables. */
export function firstSet(...values: Array<string | undefined>): string | undefined {
  return values.find((v) => v !== undefined && v !== '');
}

/** An input a command cannot run without, and where the user can give it. */
export interface RequiredInput {
  /** What is missing, in words: "environment id". */
  name: string;
  value: string | undefined;
  /** How to give it: "--environment-id or ANTHROPIC_ENVIRONMENT_ID". */
  from: string;
}

/**
 * Check every required input at once: when any is missing, one {@link ConfigError} lists them all,
 * one line each with where to set it, so a user fixes the command line in one go.
 */
export function requireInputs(command: string, inputs: readonly RequiredInput[]): void {
  const missing = inputs.filter((i) => i.value === undefined || i.value === '');
  if (missing.length === 0) return;
  throw new ConfigError(
    `${command}: ${missing.length === 1 ? 'a required input is' : `${missing.length} required inputs are`} missing`,
    missing.map((i) => `${i.name}: set ${i.from}`),
  );
}

/** The two inputs every command that claims work needs: the environment id and its key. */
export function environmentInputs(environmentId: string | undefined, environmentKey: string | undefined): RequiredInput[] {
  return [
    { name: 'environment id', value: environmentId, from: '--environment-id or ANTHROPIC_ENVIRONMENT_ID' },
    { name: 'environment key', value: environmentKey, from: '--environment-key-file or ANTHROPIC_ENVIRONMENT_KEY' },
  ];
}
