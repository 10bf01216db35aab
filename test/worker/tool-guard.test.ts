// Pins the tool guard: a tool runs at most once per tool_use id (a replay gets the recorded result
// or error back), concurrent calls for one id share one run, calls without an id always run, and
// each real run is bracketed by the sync hooks (before awaited first, after called once), and a run
// whose signal aborted and that ended in an error is reported stopped to the hooks before its end.
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ToolCallRecord, ToolGuard } from '../../src/worker/tool-guard.js';

const logger = pino({ level: 'silent' });
const ctx = (id: string) => ({ toolUse: { id, name: 't', input: {}, type: 'agent.tool_use' }, toolUseBlock: { id } }) as never;

function countingTool(impl: (n: number) => string | Promise<string>): { tool: BetaRunnableTool; calls: () => number } {
  let n = 0;
  const tool = {
    name: 'write',
    input_schema: { type: 'object' },
    parse: (x: unknown) => x,
    run: async () => impl(++n),
  } as unknown as BetaRunnableTool;
  return { tool, calls: () => n };
}

describe('ToolGuard', () => {
  it('runs a tool once per tool_use id and replays the recorded result', async () => {
    const { tool, calls } = countingTool((n) => `result ${n}`);
    const guard = new ToolGuard({ logger });
    const wrapped = guard.wrap(tool);
    expect(await wrapped.run({}, ctx('tu_1'))).toBe('result 1');
    expect(await wrapped.run({}, ctx('tu_1'))).toBe('result 1');
    expect(await wrapped.run({}, ctx('tu_2'))).toBe('result 2');
    expect(calls()).toBe(2);
    expect(guard.runs).toBe(2);
    expect(guard.replays).toBe(1);
  });

  it('replays a thrown error as the same error', async () => {
    const boom = new Error('disk full');
    const { tool, calls } = countingTool(() => {
      throw boom;
    });
    const wrapped = new ToolGuard({ logger }).wrap(tool);
    await expect(wrapped.run({}, ctx('tu_1'))).rejects.toBe(boom);
    await expect(wrapped.run({}, ctx('tu_1'))).rejects.toBe(boom);
    expect(calls()).toBe(1);
  });

  it('shares one run between concurrent calls for the same id', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { tool, calls } = countingTool(async (n) => {
      await gate;
      return `r${n}`;
    });
    const wrapped = new ToolGuard({ logger }).wrap(tool);
    const a = wrapped.run({}, ctx('tu_1'));
    const b = wrapped.run({}, ctx('tu_1'));
    release();
    expect(await Promise.all([a, b])).toEqual(['r1', 'r1']);
    expect(calls()).toBe(1);
  });

  it('always runs a call that carries no tool_use id', async () => {
    const { tool, calls } = countingTool((n) => `r${n}`);
    const wrapped = new ToolGuard({ logger }).wrap(tool);
    await wrapped.run({});
    await wrapped.run({});
    expect(calls()).toBe(2);
  });

  it('awaits beforeToolCall first and calls afterToolCall once per real run, even when the tool throws', async () => {
    const log: string[] = [];
    const hooks = {
      beforeToolCall: async () => {
        await new Promise((r) => setTimeout(r, 5));
        log.push('before');
      },
      afterToolCall: () => log.push('after'),
    };
    const guard = new ToolGuard({ hooks, logger });
    const ok = guard.wrap(countingTool(() => (log.push('run'), 'ok')).tool);
    const bad = guard.wrap(
      countingTool(() => {
        log.push('run');
        throw new Error('x');
      }).tool,
    );
    await ok.run({}, ctx('tu_1'));
    await ok.run({}, ctx('tu_1'));
    await Promise.resolve(bad.run({}, ctx('tu_2'))).catch(() => {});
    expect(log).toEqual(['before', 'run', 'after', 'before', 'run', 'after']);
  });

  it('wraps tools without mutating them, keeping prototype methods bound to the original', async () => {
    const { tool } = countingTool(() => 'x');
    const original = tool.run;
    const [wrapped] = new ToolGuard({ logger }).wrapAll([tool]);
    expect(tool.run).toBe(original);
    expect(wrapped).not.toBe(tool);
    expect((wrapped as { name: string }).name).toBe('write');

    class Shell {
      readonly name = 'bash';
      #closed = false;
      parse(x: unknown) {
        return x;
      }
      async run() {
        return this.#closed ? 'closed' : 'open';
      }
      close() {
        this.#closed = true;
      }
    }
    const shell = new Shell();
    const guarded = new ToolGuard({ logger }).wrap(shell as unknown as BetaRunnableTool);
    expect(await guarded.run({}, ctx('tu_1'))).toBe('open');
    await guarded.close?.();
    expect(await shell.run()).toBe('closed');
  });
});

describe('ToolCallRecord', () => {
  it('answers a later guard of the same session from the record, and a guard of another session not', async () => {
    const { tool, calls } = countingTool((n) => `result ${n}`);
    const record = new ToolCallRecord();
    expect(await new ToolGuard({ logger, outcomes: record.forSession('s1') }).wrap(tool).run({}, ctx('tu_1'))).toBe('result 1');
    expect(await new ToolGuard({ logger, outcomes: record.forSession('s1') }).wrap(tool).run({}, ctx('tu_1'))).toBe('result 1');
    expect(await new ToolGuard({ logger, outcomes: record.forSession('s2') }).wrap(tool).run({}, ctx('tu_1'))).toBe('result 2');
    expect(calls()).toBe(2);
  });

  it.each([
    {
      description: 'drops the least recently served session beyond maxSessions',
      maxSessions: 2,
      maxCallsPerSession: 10,
      sessions: ['a', 'b', 'a', 'c'],
      ids: ['tu'],
      rerun: { session: 'b', id: 'tu' },
      runsAgain: true,
    },
    {
      description: 'keeps a session served again recently',
      maxSessions: 2,
      maxCallsPerSession: 10,
      sessions: ['a', 'b', 'a', 'c'],
      ids: ['tu'],
      rerun: { session: 'a', id: 'tu' },
      runsAgain: false,
    },
    {
      description: 'drops the oldest call beyond maxCallsPerSession',
      maxSessions: 5,
      maxCallsPerSession: 2,
      sessions: ['a'],
      ids: ['t1', 't2', 't3'],
      rerun: { session: 'a', id: 't1' },
      runsAgain: true,
    },
    {
      description: 'keeps the newest calls of a session',
      maxSessions: 5,
      maxCallsPerSession: 2,
      sessions: ['a'],
      ids: ['t1', 't2', 't3'],
      rerun: { session: 'a', id: 't3' },
      runsAgain: false,
    },
  ])('$description', async ({ maxSessions, maxCallsPerSession, sessions, ids, rerun, runsAgain }) => {
    const { tool, calls } = countingTool((n) => `result ${n}`);
    const record = new ToolCallRecord({ maxSessions, maxCallsPerSession });
    for (const s of sessions) {
      const wrapped = new ToolGuard({ logger, outcomes: record.forSession(s) }).wrap(tool);
      for (const id of ids) await wrapped.run({}, ctx(id));
    }
    const before = calls();
    await new ToolGuard({ logger, outcomes: record.forSession(rerun.session) }).wrap(tool).run({}, ctx(rerun.id));
    expect(calls() - before).toBe(runsAgain ? 1 : 0);
    expect(record.sessions).toBeLessThanOrEqual(maxSessions);
  });
});

describe('ToolCallRecord, kept until posted and bounded in bytes', () => {
  const big = (n: number) => `${n}:`.padEnd(64 * 1024, 'x');

  it('drops an outcome once its result is posted, and the session with its last outcome', async () => {
    const { tool, calls } = countingTool(big);
    const record = new ToolCallRecord();
    const guard = new ToolGuard({ logger, outcomes: record.forSession('s1') });
    const wrapped = guard.wrap(tool);
    for (let i = 0; i < 15; i++) await wrapped.run({}, ctx(`tu_${i}`));
    expect(record.outcomes).toBe(15);
    expect(record.bytes).toBeGreaterThanOrEqual(15 * 64 * 1024);
    for (let i = 0; i < 14; i++) guard.posted(`tu_${i}`);
    expect(record.outcomes).toBe(1);
    expect(record.bytes).toBeGreaterThanOrEqual(64 * 1024);
    expect(record.bytes).toBeLessThan(2 * 64 * 1024);
    guard.posted('tu_14');
    expect({ outcomes: record.outcomes, bytes: record.bytes, sessions: record.sessions }).toEqual({ outcomes: 0, bytes: 0, sessions: 0 });
    expect(calls()).toBe(15);
  });

  it('keeps an unposted outcome for a later run of the session, which answers from it', async () => {
    const { tool, calls } = countingTool((n) => `result ${n}`);
    const record = new ToolCallRecord();
    const first = new ToolGuard({ logger, outcomes: record.forSession('s1') });
    await first.wrap(tool).run({}, ctx('tu_1'));
    await first.wrap(tool).run({}, ctx('tu_2'));
    first.posted('tu_2');
    const again = new ToolGuard({ logger, outcomes: record.forSession('s1') });
    expect(await again.wrap(tool).run({}, ctx('tu_1'))).toBe('result 1');
    expect(calls()).toBe(2);
    again.posted('tu_1');
    expect(record.outcomes).toBe(0);
  });

  it('a call posted while it still ran leaves nothing behind', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { tool } = countingTool(async (n) => {
      await gate;
      return big(n);
    });
    const record = new ToolCallRecord();
    const guard = new ToolGuard({ logger, outcomes: record.forSession('s1') });
    const running = guard.wrap(tool).run({}, ctx('tu_1'));
    guard.posted('tu_1');
    release();
    await running;
    await Promise.resolve();
    expect({ outcomes: record.outcomes, bytes: record.bytes }).toEqual({ outcomes: 0, bytes: 0 });
  });

  it('past its byte bound drops the oldest finished outcomes first, never one still running', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { tool, calls } = countingTool(async (n) => {
      if (n === 1) await gate;
      return big(n);
    });
    const record = new ToolCallRecord({ maxBytes: 3 * 64 * 1024 + 1024 });
    const guard = new ToolGuard({ logger, outcomes: record.forSession('a') });
    const slow = guard.wrap(tool).run({}, ctx('tu_slow'));
    const other = new ToolGuard({ logger, outcomes: record.forSession('b') });
    for (let i = 0; i < 5; i++) await other.wrap(tool).run({}, ctx(`tu_${i}`));
    expect(record.bytes).toBeLessThanOrEqual(3 * 64 * 1024 + 1024);
    expect(record.outcomes).toBe(4); // three finished in b, and the one still running in a
    release();
    await slow;
    await Promise.resolve();
    expect(record.bytes).toBeLessThanOrEqual(3 * 64 * 1024 + 1024);
    const before = calls();
    // The newest finished ones are kept; the oldest of b was dropped and runs again if replayed.
    await other.wrap(tool).run({}, ctx('tu_4'));
    expect(calls() - before).toBe(0);
    await other.wrap(tool).run({}, ctx('tu_0'));
    expect(calls() - before).toBe(1);
  });
});

describe('a call that was stopped or timed out', () => {
  /** Hooks recording their calls in order. */
  function recordingHooks(): { hooks: { beforeToolCall(): Promise<void>; afterToolCall(): void; callStopped(): void }; log: string[] } {
    const log: string[] = [];
    return {
      log,
      hooks: {
        beforeToolCall: async () => void log.push('before'),
        afterToolCall: () => void log.push('after'),
        callStopped: () => void log.push('stopped'),
      },
    };
  }
  const withSignal = (id: string, signal: AbortSignal) => ({ ...(ctx(id) as object), signal }) as never;

  const rows: Array<{ description: string; aborted: boolean; throws: boolean; expected: string[] }> = [
    {
      description: 'its signal aborted and it ended in an error: the hooks hear it stopped, before the end',
      aborted: true,
      throws: true,
      expected: ['before', 'stopped', 'after'],
    },
    {
      description: 'its signal aborted but it returned a result: not stopped (it finished its work)',
      aborted: true,
      throws: false,
      expected: ['before', 'after'],
    },
    { description: 'it failed on its own (no abort): not stopped', aborted: false, throws: true, expected: ['before', 'after'] },
  ];
  it.each(rows)('$description', async ({ aborted, throws, expected }) => {
    const { hooks, log } = recordingHooks();
    const ctrl = new AbortController();
    const tool = {
      name: 'bash',
      input_schema: { type: 'object' },
      run: async () => {
        if (aborted) ctrl.abort();
        if (throws) throw new Error('killed');
        return 'done';
      },
    } as unknown as BetaRunnableTool;
    const wrapped = new ToolGuard({ logger, hooks }).wrap(tool);
    const outcome = wrapped.run({}, withSignal('tu_1', ctrl.signal));
    if (throws) await expect(outcome).rejects.toThrow('killed');
    else await expect(outcome).resolves.toBe('done');
    expect(log).toEqual(expected);
  });
});
