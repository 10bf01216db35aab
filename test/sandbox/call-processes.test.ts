// How the tool host reads a process's session and start time from `/proc/<pid>/stat`, and which
// processes it kills for a call: new members of the call's shell's session, never the shell, never
// what was there when the call began, never another key's shell.
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { CallProcesses, parseStat, readProcesses } from '../../src/sandbox/call-processes.js';

const stat = (pid: number, comm: string, session: number, start: number): string =>
  `${pid} (${comm}) S 1 ${session} ${session} 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 ${start} 1000 100 ...\n`;

describe('parseStat', () => {
  it.each([
    { description: 'a plain name', line: stat(42, 'bash', 7, 1234), want: { pid: 42, state: 'S', session: 7, start: 1234 } },
    {
      description: 'a name with spaces and parentheses',
      line: stat(43, 'a) b (c', 8, 99),
      want: { pid: 43, state: 'S', session: 8, start: 99 },
    },
    { description: 'a truncated line', line: '44 (x) S 1', want: undefined },
    { description: 'no parenthesis', line: '45 x S 1 2 3', want: undefined },
  ])('$description', ({ line, want }) => {
    expect(parseStat(line)).toEqual(want);
  });

  it('reads this machine’s /proc: this process is in it with its own session', () => {
    const me = readProcesses().find((p) => p.pid === process.pid);
    expect(me).toBeDefined();
    expect(me!.start).toBeGreaterThan(0);
    const sid = Number(fs.readFileSync(`/proc/${process.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[3]);
    expect(me!.session).toBe(sid);
  });

  it('leaves out what is not a process and what cannot be read', async () => {
    const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-proc-'));
    try {
      await fsp.mkdir(path.join(root, '10'));
      await fsp.writeFile(path.join(root, '10', 'stat'), stat(10, 'sh', 10, 5));
      await fsp.mkdir(path.join(root, '11'));
      await fsp.mkdir(path.join(root, 'self'));
      expect(readProcesses(root)).toEqual([{ pid: 10, state: 'S', session: 10, start: 5 }]);
    } finally {
      await fsp.rm(root, { recursive: true, force: true });
    }
  });
});

describe('CallProcesses.kill', () => {
  /** A shell as the toolset starts one: the leader of a session of its own, fed commands on stdin. */
  function shell(): { child: ChildProcess; exited: Promise<unknown> } {
    const child = spawn('/bin/bash', ['--noprofile', '--norc'], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
    return { child, exited: new Promise((resolve) => child.once('exit', resolve)) };
  }
  const running = (n: number): number[] =>
    readProcesses()
      .filter((p) => {
        try {
          return fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8') === `sleep\0${n}\0`;
        } catch {
          return false;
        }
      })
      .map((p) => p.pid);
  async function until(check: () => boolean): Promise<void> {
    for (let i = 0; i < 100 && !check(); i++) await sleep(50);
  }

  it("kills the call's new processes in its shell's session, not the shell, an earlier job or another key's shell", async () => {
    const calls = new CallProcesses();
    const a = shell();
    const b = shell();
    try {
      calls.begin(1, 'a');
      calls.started(1, a.child.pid!, true, a.exited);
      a.child.stdin!.write('sleep 3001 &\n');
      calls.end(1);
      calls.begin(2, 'b');
      calls.started(2, b.child.pid!, true, b.exited);
      b.child.stdin!.write('sleep 3003 &\n');
      calls.end(2);
      await until(() => running(3001).length === 1 && running(3003).length === 1);

      calls.begin(3, 'a');
      const wentOn = path.join(os.tmpdir(), `maw-went-on-${process.pid}-${Date.now()}`);
      a.child.stdin!.write(`sleep 3002; sleep 3004; echo > ${wentOn}\n`);
      await until(() => running(3002).length === 1);
      // Killed again until the line is done, as the host does: the shell goes on with the rest of its
      // line as after a failed command, and each program it starts is killed too (builtins run).
      let killed = 0;
      await until(() => {
        killed += calls.kill(3);
        return fs.existsSync(wentOn);
      });
      await fsp.rm(wentOn, { force: true });
      expect(killed).toBeGreaterThanOrEqual(2);
      expect(running(3002)).toEqual([]);
      expect(running(3004)).toEqual([]);
      expect(running(3001)).toHaveLength(1);
      expect(running(3003)).toHaveLength(1);
      expect(a.child.exitCode).toBeNull();
      expect(b.child.exitCode).toBeNull();
      calls.end(3);
      expect(calls.kill(3)).toBe(0);
    } finally {
      for (const s of [a, b]) process.kill(-s.child.pid!, 'SIGKILL');
      await Promise.all([a.exited, b.exited]);
    }
  });
});
