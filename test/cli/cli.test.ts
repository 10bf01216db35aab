// Pins the CLI's surface: the top-level help lists the commands; `help <command>` and
// `<command> --help` print that command's flags, environment variables and exactly the exit codes
// it can return; unknown commands and flags get a "did you mean"; usage mistakes exit 2; missing
// inputs are all named in one message and exit 3; the environment key is never a flag; every
// ANTHROPIC_* variable leaves the process environment at start; and a first signal calls the drain
// while a second one exits at once with 130/143.
import { EventEmitter } from 'node:events';
import net from 'node:net';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/cli.js';
import { commands } from '../../src/cli/commands.js';
import { EXIT, exitCodeForOutcome } from '../../src/cli/exit-codes.js';
import type { CliIo } from '../../src/cli/io.js';
import { handleShutdownSignals, type SignalTarget } from '../../src/cli/signals.js';

/** An io that captures stdout, plain stderr and the logger's lines (`log`). */
function io(env: NodeJS.ProcessEnv = {}): CliIo & { out: string; err: string; log: string } {
  const o = {
    out: '',
    err: '',
    log: '',
    env,
    cwd: process.cwd(),
    stdout: (t: string) => void (o.out += t),
    stderr: (t: string) => void (o.err += t),
    logStream: new Writable({
      write(chunk: Buffer, _encoding, done) {
        o.log += chunk.toString();
        done();
      },
    }),
  };
  return o;
}

/** The logger's lines, parsed. */
function logLines(o: { log: string }): Array<{ level: number; msg: string; issues?: string[] }> {
  return o.log
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { level: number; msg: string; issues?: string[] });
}

/** The exit codes a help text lists, in order. */
function listedExitCodes(help: string): number[] {
  const section = help.split('Exit codes:\n')[1] ?? '';
  return [...section.matchAll(/^ {2}(\d+) /gm)].map((m) => Number(m[1]));
}

const NAMES = ['run', 'handle', 'launch', 'doctor', 'recover', 'demo', 'emulator'];

describe('the CLI surface', () => {
  it('lists every command in the top-level help, with how to get the help of one', async () => {
    const o = io();
    expect(await runCli(['--help'], o, commands())).toBe(EXIT.OK);
    for (const name of NAMES) expect(o.out).toMatch(new RegExp(`^  ${name} `, 'm'));
    expect(o.out).toContain('help <command>');
    expect(o.out).toContain('MAW_LOG_LEVEL');
  });

  it.each(NAMES)('"help %s" prints the same help as "<command> --help" and exits 0', async (name) => {
    const viaHelp = io();
    const viaFlag = io();
    expect(await runCli(['help', name], viaHelp, commands())).toBe(EXIT.OK);
    expect(await runCli([name, '--help'], viaFlag, commands())).toBe(EXIT.OK);
    expect(viaHelp.out).toContain(`Usage: managed-agents-worker ${name}`);
    expect(viaHelp.out).toBe(viaFlag.out);
    expect(viaHelp.out).not.toContain('Commands:');
  });

  const exitCodes = [
    { description: 'run', name: 'run', codes: [0, 1, 2, 3, 4, 130, 143] },
    {
      description: 'handle (never 4: a refused credential fails the session, 10)',
      name: 'handle',
      codes: [0, 1, 2, 3, 10, 11, 12, 130, 143],
    },
    { description: 'launch', name: 'launch', codes: [0, 1, 2, 3, 4, 130, 143] },
    { description: 'doctor', name: 'doctor', codes: [0, 1, 2, 3, 5] },
    { description: 'recover', name: 'recover', codes: [0, 1, 2, 3] },
    { description: 'demo', name: 'demo', codes: [0, 1, 2, 5] },
    { description: 'emulator', name: 'emulator', codes: [0, 1, 2, 130, 143] },
  ];
  it.each(exitCodes)('the help of $description lists exactly the exit codes it can return', async ({ name, codes }) => {
    const o = io();
    await runCli([name, '--help'], o, commands());
    expect(listedExitCodes(o.out)).toEqual(codes);
  });

  it('documents MAW_LOG_LEVEL in the help of each command that logs', async () => {
    for (const name of ['run', 'handle', 'launch']) {
      const o = io();
      await runCli([name, '--help'], o, commands());
      expect(o.out, name).toMatch(/^ {2}MAW_LOG_LEVEL +log level/m);
    }
  });

  const suggestions = [
    { description: 'a misspelt command', argv: ['rn'], hint: 'Did you mean run?' },
    { description: 'the help of a misspelt command', argv: ['help', 'rnu'], hint: 'Did you mean run?' },
    { description: 'a misspelt flag', argv: ['run', '--concurency', '2'], hint: 'Did you mean --concurrency?' },
    { description: 'a misspelt flag of handle', argv: ['handle', '--work-secret-fil'], hint: 'Did you mean --work-secret-file?' },
  ];
  it.each(suggestions)('suggests the right name for $description and exits 2', async ({ argv, hint }) => {
    const o = io();
    expect(await runCli(argv, o, commands())).toBe(EXIT.USAGE);
    expect(o.err).toContain(hint);
  });

  const usage = [
    { description: 'an unknown command', argv: ['serve'] },
    { description: 'an unknown flag', argv: ['run', '--frobnicate'] },
    { description: 'a concurrency out of range', argv: ['run', '--concurrency', '0'] },
    { description: 'a sync interval below 5000 ms', argv: ['run', '--memory-sync-interval', '1000'] },
    { description: 'a final flush bound of 0 (it would cut off every final sync)', argv: ['run', '--final-flush', '0'] },
    { description: 'an unknown deletion mode', argv: ['run', '--memory-sync-deletions', 'sometimes'] },
    { description: 'launch without --on-work', argv: ['launch'] },
    { description: 'an unknown log level in MAW_LOG_LEVEL', argv: ['run'], env: { MAW_LOG_LEVEL: 'loud' } },
    { description: 'an emulator mount root that does not exist', argv: ['emulator', '--mount-root', '/nonexistent/maw-mount-root'] },
  ];
  it.each(usage)('exits 2 on $description', async ({ argv, env }) => {
    const o = io({ ANTHROPIC_ENVIRONMENT_ID: 'env_1', ANTHROPIC_ENVIRONMENT_KEY: 'k', ...env });
    expect(await runCli(argv, o, commands())).toBe(EXIT.USAGE);
    expect(o.err).toMatch(/^managed-agents-worker: /);
  });

  it('refuses an emulator port that is in use with exit 2, naming the port', async () => {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    try {
      const o = io();
      expect(await runCli(['emulator', '--port', String(port)], o, commands())).toBe(EXIT.USAGE);
      expect(o.err).toContain(`--port ${port}: already in use`);
      expect(o.out).toBe('');
    } finally {
      server.close();
    }
  });

  it('says that "off" turns memory off when the sync interval is too short', async () => {
    const o = io();
    expect(await runCli(['run', '--memory-sync-interval', '1'], o, commands())).toBe(EXIT.USAGE);
    expect(o.err).toContain('"off"');
    expect(o.err).toContain('5000');
  });

  it('exits 2 with the help on stderr when no command is given', async () => {
    const o = io();
    expect(await runCli([], o, commands())).toBe(EXIT.USAGE);
    expect(o.err).toContain('Commands:');
  });

  it.each(['run', 'handle', 'launch', 'doctor'])(
    'refuses the key as a flag of %s (exit 2), pointing at --environment-key-file',
    async (name) => {
      const o = io();
      const argv = [name, '--environment-key', 'sk-on-the-command-line', ...(name === 'launch' ? ['--on-work', 'true'] : [])];
      expect(await runCli(argv, o, commands())).toBe(EXIT.USAGE);
      expect(o.err + o.log).toContain('--environment-key-file');
      expect(o.err + o.log).not.toContain('sk-on-the-command-line');
    },
  );

  const missing = [
    {
      description: 'run with neither environment id nor key',
      argv: ['run'],
      env: {},
      lines: [
        'environment id: set --environment-id or ANTHROPIC_ENVIRONMENT_ID',
        'environment key: set --environment-key-file or ANTHROPIC_ENVIRONMENT_KEY',
      ],
    },
    {
      description: 'run without an environment key',
      argv: ['run'],
      env: { ANTHROPIC_ENVIRONMENT_ID: 'env_1' },
      lines: ['environment key: set --environment-key-file or ANTHROPIC_ENVIRONMENT_KEY'],
    },
    {
      description: 'launch without an environment id',
      argv: ['launch', '--on-work', 'true'],
      env: { ANTHROPIC_ENVIRONMENT_KEY: 'secret-key-value' },
      lines: ['environment id: set --environment-id or ANTHROPIC_ENVIRONMENT_ID'],
    },
    {
      description: 'handle with nothing set',
      argv: ['handle'],
      env: {},
      lines: [
        'work id: set --work-id or ANTHROPIC_WORK_ID',
        'session id: set --session-id or ANTHROPIC_SESSION_ID',
        'environment id: set --environment-id or ANTHROPIC_ENVIRONMENT_ID',
        'credential (work secret or environment key): set --work-secret-file or ANTHROPIC_WORK_SECRET, or --environment-key-file or ANTHROPIC_ENVIRONMENT_KEY',
      ],
    },
  ];
  it.each(missing)(
    'names every missing input in one plain-text message, as a usage error, and exits 3: $description',
    async ({ argv, env, lines }) => {
      const o = io(env);
      expect(await runCli([...argv, '--base-url', 'http://127.0.0.1:9'], o, commands())).toBe(EXIT.CONFIG);
      // Refused before the command starts: text on stderr (no JSON log line), every input named.
      const text = o.err.split('\n').filter((l) => l !== '');
      expect(text[0]).toMatch(new RegExp(`^managed-agents-worker: ${argv[0]}: (a required input is|\\d required inputs are) missing$`));
      expect(text.slice(1)).toEqual(lines.map((l) => `  ${l}`));
      expect(logLines(o).filter((l) => l.level >= 50)).toEqual([]);
      expect(o.err + o.log).not.toContain('EnvironmentWorker constructor');
      expect(o.err + o.log).not.toContain('secret-key-value');
    },
  );

  it('maps every session outcome of handle to its documented exit code', () => {
    expect(
      (['completed', 'skipped', 'failed', 'lease_lost', 'stopped_by_server', 'aborted'] as const).map((s) => exitCodeForOutcome(s)),
    ).toEqual([0, 0, 10, 11, 12, 0]);
  });
});

describe('the ANTHROPIC_* credentials', () => {
  it('leave the process environment at start, while the command still reads them', async () => {
    const env: NodeJS.ProcessEnv = {
      PATH: '/usr/bin',
      ANTHROPIC_ENVIRONMENT_ID: 'env_1',
      ANTHROPIC_ENVIRONMENT_KEY: 'sk-env-key',
      ANTHROPIC_WORK_SECRET: 'work-secret',
      ANTHROPIC_API_KEY: 'sk-api-key',
      anthropic_auth_token: 'lower-case-token',
    };
    const o = io(env);
    // handle still finds the environment id and key it was given: only the work and session ids are missing.
    expect(await runCli(['handle'], o, commands())).toBe(EXIT.CONFIG);
    expect(o.err.split('\n').filter((l) => l.startsWith('  '))).toEqual([
      '  work id: set --work-id or ANTHROPIC_WORK_ID',
      '  session id: set --session-id or ANTHROPIC_SESSION_ID',
    ]);
    expect(env).toEqual({ PATH: '/usr/bin', ANTHROPIC_ENVIRONMENT_ID: 'env_1' });
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
    const remove = handleShutdownSignals(
      (s) => drains.push(s),
      (c) => exits.push(c),
      target,
    );
    target.emit(signal);
    expect(drains).toEqual([signal]);
    expect(exits).toEqual([]);
    target.emit(signal);
    expect(exits).toEqual([code]);
    remove();
    expect(target.listenerCount('SIGTERM') + target.listenerCount('SIGINT')).toBe(0);
  });
});
