// Pins what counts as a live process: one signal 0 reaches, or one signal 0 is refused for because
// it belongs to another user (EPERM); not a process that exited and was reaped, and not an id that
// names no single process (0, negative, fractional).
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { processAlive, signalErrorMeansAlive } from '../../src/internal/process-alive.js';

/** The pid of a child that has exited and been reaped. */
function reapedChildPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  expect(child.status).toBe(0);
  return child.pid;
}

describe('processAlive', () => {
  const rows = [
    { description: 'this process is alive', pid: () => process.pid, expected: true },
    { description: 'a child that exited and was reaped is not', pid: reapedChildPid, expected: false },
    { description: 'pid 1 is alive, whoever asks (EPERM for a user other than its owner)', pid: () => 1, expected: true },
    { description: 'pid 0 names a process group, not a process', pid: () => 0, expected: false },
    { description: 'a negative pid names a process group, not a process', pid: () => -1, expected: false },
    { description: 'a fractional pid names nothing', pid: () => 1.5, expected: false },
  ];
  for (const row of rows) {
    it(row.description, () => {
      expect(processAlive(row.pid())).toBe(row.expected);
    });
  }
});

describe('signalErrorMeansAlive', () => {
  const rows = [
    { description: 'EPERM: the process exists and belongs to another user', error: { code: 'EPERM' }, expected: true },
    { description: 'ESRCH: no such process', error: { code: 'ESRCH' }, expected: false },
    { description: 'any other error', error: new TypeError('bad pid'), expected: false },
    { description: 'a throw that is not an object', error: null, expected: false },
  ];
  for (const row of rows) {
    it(row.description, () => {
      expect(signalErrorMeansAlive(row.error)).toBe(row.expected);
    });
  }

  it.runIf(process.getuid?.() === 0)("says alive for what an unprivileged user's signal 0 to pid 1 fails with", () => {
    // Root may signal any process, so the EPERM branch is reached from a child run as nobody.
    const child = spawnSync(
      process.execPath,
      ['-e', 'try { process.kill(1, 0); process.stdout.write("none") } catch (e) { process.stdout.write(String(e.code)) }'],
      { uid: 65534, gid: 65534, cwd: '/', encoding: 'utf8' },
    );
    expect(child.stdout).toBe('EPERM');
    expect(signalErrorMeansAlive({ code: child.stdout })).toBe(true);
  });
});
