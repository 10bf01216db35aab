// The SDK's own toolset in a real bubblewrap sandbox, called as the SDK runner calls it: each call's
// context carries a signal and the session thread (`_sessionThread`, key and signal). Calls of two
// threads run at once, each thread in its own shell, and a thread that ends loses its shell only.
// A call past the sandbox's bound loses the processes it started, not the session's shell, its
// background jobs, its saved output or `/tmp`.
//
// What the toolset does differs by SDK version, and each test checks the installed one's:
// from 1.16 bash keeps one shell per thread (killed when the thread's signal aborts) and saves long
// output to a file; 1.14 and 1.15 have one shell for every call, which runs one command at a time.
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { INSTALLED_SDK_VERSION, toolsetShellPerThread } from '../../src/sandbox/sdk-bounds.js';
import type { SessionSandbox } from '../../src/sandbox/session-sandbox.js';
import { run, sessionSandbox, thread } from './threads.js';

const perThread = toolsetShellPerThread();

/** A bash line that prints how many processes in the sandbox run `sleep <n>`. */
const count = (n: number): string =>
  `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null | grep -c '^sleep ${n} ' || :`;

describe(`session threads in the sandbox (SDK ${INSTALLED_SDK_VERSION}: ${perThread ? 'a shell per thread' : 'one shell'})`, () => {
  let work: string;
  let sandbox: SessionSandbox;
  beforeEach(async () => {
    work = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-threads-'));
  });
  afterEach(async () => {
    await sandbox.close();
    await fsp.rm(work, { recursive: true, force: true });
  });

  it('two threads run `sleep 2` at once (1.16) / one after the other in the one shell (1.14)', async () => {
    sandbox = await sessionSandbox(work);
    const [a, b] = [thread('a'), thread('b')];
    // Both shells exist before the clock starts, so it times the commands only.
    expect(await run(sandbox, 'bash', { command: 'echo a' }, a)).toEqual({ ok: true, text: 'a' });
    expect(await run(sandbox, 'bash', { command: 'echo b' }, b)).toEqual({ ok: true, text: 'b' });
    const started = Date.now();
    const [ra, rb] = await Promise.all([
      run(sandbox, 'bash', { command: 'sleep 2; echo done-a' }, a),
      run(sandbox, 'bash', { command: 'sleep 2; echo done-b' }, b),
    ]);
    const wall = Date.now() - started;
    expect([ra, rb]).toEqual([
      { ok: true, text: 'done-a' },
      { ok: true, text: 'done-b' },
    ]);
    if (perThread) expect(wall).toBeLessThan(3_500);
    else expect(wall).toBeGreaterThanOrEqual(4_000);
    expect(sandbox.hostsStarted).toBe(1);
  });

  it("thread B does not see thread A's export (1.16) / does, in the one shell (1.14)", async () => {
    sandbox = await sessionSandbox(work);
    const [a, b] = [thread('a'), thread('b')];
    expect(await run(sandbox, 'bash', { command: 'export MARK=from-a; echo "a:$MARK"' }, a)).toEqual({ ok: true, text: 'a:from-a' });
    expect(await run(sandbox, 'bash', { command: 'echo "b:${MARK:-unset}"' }, b)).toEqual({
      ok: true,
      text: perThread ? 'b:unset' : 'b:from-a',
    });
    expect(await run(sandbox, 'bash', { command: 'echo "a:$MARK"' }, a)).toEqual({ ok: true, text: 'a:from-a' });
  });

  it('a thread that ends loses its own shell and jobs only (1.16) / nothing, in the one shell (1.14)', async () => {
    sandbox = await sessionSandbox(work);
    const [a, b] = [thread('a'), thread('b')];
    expect((await run(sandbox, 'bash', { command: 'export MARK=a; sleep 1101 & echo started' }, a)).text).toBe('started');
    expect((await run(sandbox, 'bash', { command: 'export MARK=b; sleep 1102 & echo started' }, b)).text).toBe('started');
    expect((await run(sandbox, 'bash', { command: `${count(1101)}; ${count(1102)}` }, b)).text).toBe('1\n1');
    a.end.abort();
    // The host hears of the end on its pipe; the toolset then kills the shell's process group.
    const deadline = Date.now() + 10_000;
    let seen = '';
    for (;;) {
      seen = (await run(sandbox, 'bash', { command: `${count(1101)}; ${count(1102)}; echo "$MARK"` }, b)).text;
      if (!perThread || seen.startsWith('0') || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    if (perThread) {
      expect(seen).toBe('0\n1\nb');
      const after = await run(sandbox, 'bash', { command: 'echo "$MARK"' }, a);
      expect(after.ok).toBe(false);
      expect(after.text).toContain('did not run, because the shell is gone');
    } else {
      // 1.14's toolset does not read the thread context: its one shell (B's view: A's export last) lives on.
      expect(seen).toBe('1\n1\nb');
    }
    expect(sandbox.hostsStarted).toBe(1);
  });

  it('a call past the bound loses its own processes; the shell, an earlier job, /tmp and saved output stay', async () => {
    sandbox = await sessionSandbox(work, 4_000);
    const a = thread('a');
    const setup = 'export KEEP=kept; echo tmp-file > /tmp/t; cd /tmp; sleep 1201 & echo started';
    expect(await run(sandbox, 'bash', { command: setup }, a)).toEqual({ ok: true, text: 'started' });
    // From 1.16, output over 30 000 characters is cut and the rest saved to a file `read` opens.
    const long = await run(sandbox, 'bash', { command: 'seq 1 20000' }, a);
    const saved = /saved to: (\S+)/.exec(long.text)?.[1];
    expect(saved !== undefined).toBe(perThread);

    const started = Date.now();
    // The rest of the line goes on as after a failed command: `&&` stops, `;` goes on, and a
    // program started after the kill is killed too.
    const command = 'echo before-the-wait; sleep 1202 && echo never; sleep 1203; echo went-on';
    const slow = await run(sandbox, 'bash', { command, timeout_ms: 100_000 }, a);
    expect(Date.now() - started).toBeLessThan(12_000);
    expect(slow.ok).toBe(false);
    expect(slow.text).toContain('the call was still running after 4000 ms, so the processes it started were killed');
    expect(slow.text).toMatch(/before-the-wait[\s\S]*went-on/);
    expect(slow.text).not.toContain('never');

    const after = await run(
      sandbox,
      'bash',
      { command: `echo "$KEEP $(pwd) $(cat /tmp/t)"; ${count(1201)}; ${count(1202)}; ${count(1203)}` },
      a,
    );
    expect(after).toEqual({ ok: true, text: 'kept /tmp tmp-file\n1\n0\n0' });
    if (saved !== undefined) {
      const read = await run(sandbox, 'read', { file_path: saved, view_range: [19_999, 20_000] }, a);
      expect(read.ok).toBe(true);
      expect(read.text).toContain('19999');
    }
    expect(sandbox.hostsStarted).toBe(1);
  });

  it("a call the runner aborts answers at once; the host and the other thread's shell stay", async () => {
    sandbox = await sessionSandbox(work);
    const [a, b] = [thread('a'), thread('b')];
    expect((await run(sandbox, 'bash', { command: 'export MARK=b; echo set' }, b)).text).toBe('set');
    const stop = new AbortController();
    const started = Date.now();
    const pending = run(sandbox, 'bash', { command: 'sleep 1401; echo never' }, a, stop.signal);
    await new Promise((r) => setTimeout(r, 500));
    stop.abort();
    const stopped = await pending;
    expect(stopped.ok).toBe(false);
    expect(stopped.text).not.toContain('never');
    expect(stopped.text).not.toContain('could not run this call');
    expect(Date.now() - started).toBeLessThan(5_000);
    // 1.14 ends its one shell on an abort, and B's export with it.
    const seen = await run(sandbox, 'bash', { command: `echo "mark=$MARK"; ${count(1401)}` }, b);
    expect(seen).toEqual({ ok: true, text: perThread ? 'mark=b\n0' : 'mark=\n0' });
    expect(sandbox.hostsStarted).toBe(1);
  });

  // Before 1.16 there is no other thread's call to leave alone: the one shell runs B's after A's.
  it.runIf(perThread)('a timed-out call in one thread leaves a running call of another thread alone (1.16)', async () => {
    sandbox = await sessionSandbox(work, 3_000);
    const [a, b] = [thread('a'), thread('b')];
    const [ra, rb] = await Promise.all([
      run(sandbox, 'bash', { command: 'sleep 1301; echo never', timeout_ms: 100_000 }, a),
      run(sandbox, 'bash', { command: 'sleep 2.5; echo b-finished' }, b),
    ]);
    expect(ra.ok).toBe(false);
    expect(ra.text).toContain('still running after 3000 ms');
    expect(rb).toEqual({ ok: true, text: 'b-finished' });
    expect(sandbox.hostsStarted).toBe(1);
  });
});
