// The worker's side of the tool host pipe, against a stand-in host that records what it is sent:
// a call carries its session thread's key, the end of a thread is told once, a call past its bound
// is told `timeout` and its answer comes back as `timedOut` with the host alive, and a call that
// does not answer after that kills the host. Calls do not wait for each other.
import { getEventListeners } from 'node:events';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ToolHostProcess } from '../../src/sandbox/tool-host-process.js';
import { NO_BOUNDS } from '../../src/sandbox/launcher.js';

// Answers init; a call with `answer: 'now'` at once, with `answer: 'on-timeout'` when told its
// timeout, with `answer: 'never'` never. Writes every line it gets to the file named in argv.
const STAND_IN = `
  const fs = require('node:fs');
  const rl = require('node:readline').createInterface({ input: process.stdin });
  const out = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
  const waiting = new Map();
  rl.on('line', (line) => {
    fs.appendFileSync(process.argv[1], line + '\\n');
    const m = JSON.parse(line);
    if (m.t === 'init') out({ t: 'ready' });
    if (m.t === 'call' && m.input.answer === 'now') out({ t: 'result', id: m.id, isError: false, content: 'done ' + m.id });
    if (m.t === 'call' && m.input.answer === 'on-timeout') waiting.set(m.id, true);
    if (m.t === 'timeout' && waiting.has(m.id)) out({ t: 'result', id: m.id, isError: true, content: 'partial output' });
  });`;

describe('ToolHostProcess', () => {
  let dir: string;
  let host: ToolHostProcess;
  let received: string;
  beforeEach(async () => {
    dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-host-process-'));
    const launcher = path.join(dir, 'launch');
    // Stands where bubblewrap would: drops `--info-fd 3` and runs the rest.
    await fsp.writeFile(launcher, '#!/bin/sh\nshift 2\nexec "$@"\n', { mode: 0o755 });
    received = path.join(dir, 'received');
    host = new ToolHostProcess({
      launch: { bwrap: launcher, args: [process.execPath, '-e', STAND_IN, received], seccomp: undefined, bounds: NO_BOUNDS },
      init: { t: 'init', workdir: dir, allowedRoots: [], readOnlyRoots: [], maxFileBytes: undefined, shellPerThread: true },
      log: pino({ level: 'silent' }),
    });
  });
  afterEach(async () => {
    await host.close();
    await fsp.rm(dir, { recursive: true, force: true });
  });
  const lines = async (): Promise<Array<Record<string, unknown>>> =>
    (await fsp.readFile(received, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  it("sends each call's thread key, and a thread's end once", async () => {
    const a = new AbortController();
    const signal = a.signal;
    const first = await host.call('bash', { answer: 'now' }, { timeoutMs: 10_000, thread: { key: 's/a', signal } });
    const second = await host.call('bash', { answer: 'now' }, { timeoutMs: 10_000, thread: { key: 's/a', signal } });
    const bare = await host.call('bash', { answer: 'now' }, { timeoutMs: 10_000 });
    expect([first, second, bare]).toEqual([
      { kind: 'answered', isError: false, content: 'done 1' },
      { kind: 'answered', isError: false, content: 'done 2' },
      { kind: 'answered', isError: false, content: 'done 3' },
    ]);
    a.abort();
    await host.call('bash', { answer: 'now' }, { timeoutMs: 10_000 });
    const got = await lines();
    expect(got.filter((m) => m['t'] === 'call').map((m) => m['thread'])).toEqual(['s/a', 's/a', undefined, undefined]);
    expect(got.filter((m) => m['t'] === 'thread-end')).toEqual([{ t: 'thread-end', thread: 's/a' }]);
    expect(got.findIndex((m) => m['t'] === 'thread-end')).toBeLessThan(got.length - 1);
  });

  it('a call past its bound is told so, answers timedOut, and the host lives on; calls run at once', async () => {
    const started = Date.now();
    const [slow, quick] = await Promise.all([
      host.call('bash', { answer: 'on-timeout' }, { timeoutMs: 500 }),
      host.call('bash', { answer: 'now' }, { timeoutMs: 10_000 }),
    ]);
    expect(slow).toEqual({ kind: 'timedOut', timeoutMs: 500, content: 'partial output' });
    expect(quick).toEqual({ kind: 'answered', isError: false, content: 'done 2' });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(host.alive).toBe(true);
    expect((await lines()).filter((m) => m['t'] === 'timeout')).toEqual([{ t: 'timeout', id: 1 }]);
  });

  it('a call that does not answer after its timeout kills the host', async () => {
    const result = await host.call('bash', { answer: 'never' }, { timeoutMs: 300 });
    expect(result).toEqual({ kind: 'failed', message: 'the tool call was still running after 300 ms and did not stop' });
    expect(host.alive).toBe(false);
  });

  it('a call made after the host failed answers failed at once (it does not wait forever)', async () => {
    expect(await host.call('bash', { answer: 'now' }, { timeoutMs: 10_000 })).toMatchObject({ kind: 'answered' });
    await host.close();
    const late = await Promise.race([
      host.call('bash', { answer: 'now' }, { timeoutMs: 10_000 }),
      new Promise((resolve) => setTimeout(() => resolve('no answer within 2 s'), 2_000)),
    ]);
    expect(late).toEqual({ kind: 'failed', message: 'the session ended' });
  });

  it("keeps no listener on a session thread's signal once the host is gone", async () => {
    const thread = new AbortController();
    await host.call('bash', { answer: 'now' }, { timeoutMs: 10_000, thread: { key: 's/t', signal: thread.signal } });
    expect(getEventListeners(thread.signal, 'abort')).toHaveLength(1);
    await host.close();
    expect(getEventListeners(thread.signal, 'abort')).toHaveLength(0);
  });
});
