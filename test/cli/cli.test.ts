// Pins the CLI's surface: every command answers --help, the top-level help lists the commands and
// the exit-code table, usage mistakes exit 2, refused configuration exits 3, and a first signal
// calls the drain while a second one exits at once with 130/143.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/cli.js';
import { commands } from '../../src/cli/commands.js';
import { EXIT, exitCodeForOutcome } from '../../src/cli/exit-codes.js';
import type { CliIo } from '../../src/cli/io.js';
import { handleShutdownSignals, type SignalTarget } from '../../src/cli/signals.js';

function io(env: NodeJS.ProcessEnv = {}): CliIo & { out: string; err: string } {
  const o = { out: '', err: '', env, cwd: process.cwd(), stdout: (t: string) => void (o.out += t), stderr: (t: string) => void (o.err += t) };
  return o;
}

describe('the CLI surface', () => {
  it('lists every command and the exit codes in the top-level help', async () => {
    const o = io();
    expect(await runCli(['--help'], o, commands())).toBe(EXIT.OK);
    for (const name of ['run', 'handle', 'launch', 'doctor', 'demo']) expect(o.out).toMatch(new RegExp(`^  ${name}\\s`, 'm'));
    expect(o.out).toContain('Exit codes:');
  });

  it.each(['run', 'handle', 'launch', 'doctor', 'demo'])('answers "%s --help" with its flags and exit 0', async (name) => {
    const o = io();
    expect(await runCli([name, '--help'], o, commands())).toBe(EXIT.OK);
    expect(o.out).toContain(`Usage: managed-agents-worker ${name}`);
    expect(o.out).toContain('Exit codes:');
  });

  const usage = [
    { description: 'an unknown command', argv: ['serve'] },
    { description: 'an unknown flag', argv: ['run', '--frobnicate'] },
    { description: 'a concurrency out of range', argv: ['run', '--concurrency', '0'] },
    { description: 'a sync interval below 5000 ms', argv: ['run', '--memory-sync-interval', '1000'] },
    { description: 'an unknown deletion mode', argv: ['run', '--memory-sync-deletions', 'sometimes'] },
    { description: 'launch without --on-work', argv: ['launch'] },
  ];
  it.each(usage)('exits 2 on $description', async ({ argv }) => {
    const o = io({ ANTHROPIC_ENVIRONMENT_ID: 'env_1', ANTHROPIC_ENVIRONMENT_KEY: 'k' });
    expect(await runCli(argv, o, commands())).toBe(EXIT.USAGE);
    expect(o.err).toMatch(/^managed-agents-worker: /);
  });

  it('exits 2 with the help when no command is given', async () => {
    const o = io();
    expect(await runCli([], o, commands())).toBe(EXIT.USAGE);
    expect(o.out).toContain('Commands:');
  });

  const missing = [
    { description: 'run without an environment id', argv: ['run'], env: { ANTHROPIC_ENVIRONMENT_KEY: 'secret-key-value' }, flag: '--environment-id', variable: 'ANTHROPIC_ENVIRONMENT_ID' },
    { description: 'run without an environment key', argv: ['run'], env: { ANTHROPIC_ENVIRONMENT_ID: 'env_1' }, flag: '--environment-key', variable: 'ANTHROPIC_ENVIRONMENT_KEY' },
    { description: 'launch without an environment id', argv: ['launch', '--on-work', 'true'], env: { ANTHROPIC_ENVIRONMENT_KEY: 'secret-key-value' }, flag: '--environment-id', variable: 'ANTHROPIC_ENVIRONMENT_ID' },
    { description: 'launch without an environment key', argv: ['launch', '--on-work', 'true'], env: { ANTHROPIC_ENVIRONMENT_ID: 'env_1' }, flag: '--environment-key', variable: 'ANTHROPIC_ENVIRONMENT_KEY' },
  ];
  it.each(missing)('exits 3 (configuration refused, as documented) on $description, naming the flag and the variable', async ({ argv, env, flag, variable }) => {
    const o = io(env);
    expect(await runCli([...argv, '--log-level', 'silent', '--base-url', 'http://127.0.0.1:9'], o, commands())).toBe(EXIT.CONFIG);
    expect(o.err).toContain(flag);
    expect(o.err).toContain(variable);
    // The fix a CLI user can apply, not the library's constructor.
    expect(o.err).not.toContain('EnvironmentWorker constructor');
    expect(o.err).not.toContain('secret-key-value');
  });

  it('exits 3 when handle has no work id', async () => {
    const o = io({ ANTHROPIC_ENVIRONMENT_ID: 'env_1', ANTHROPIC_ENVIRONMENT_KEY: 'k' });
    expect(await runCli(['handle', '--log-level', 'silent', '--base-url', 'http://127.0.0.1:9'], o, commands())).toBe(EXIT.CONFIG);
    expect(o.err).toContain('ANTHROPIC_WORK_ID');
  });

  it('maps every session outcome to its documented exit code', () => {
    expect(
      (['completed', 'skipped', 'failed', 'lease_lost', 'stopped_by_server', 'aborted'] as const).map((s) => exitCodeForOutcome(s)),
    ).toEqual([0, 0, 10, 11, 12, 13]);
  });
});

describe('handleShutdownSignals', () => {
  const rows = [
    { description: 'SIGTERM twice exits 143', signal: 'SIGTERM' as const, code: 143 },
    { description: 'SIGINT twice exits 130', signal: 'SIGINT' as const, code: 130 },
  ];
  it.each(rows)('calls the drain on the first signal; $description', ({ signal, code }) => {
    const target = new EventEmitter() as EventEmitter & SignalTarget;
    const drains: string[] = [];
    const exits: number[] = [];
    const remove = handleShutdownSignals((s) => drains.push(s), (c) => exits.push(c), target);
    target.emit(signal);
    expect(drains).toEqual([signal]);
    expect(exits).toEqual([]);
    target.emit(signal);
    expect(exits).toEqual([code]);
    remove();
    expect(target.listenerCount('SIGTERM') + target.listenerCount('SIGINT')).toBe(0);
  });
});
