/**
 * Pins the emulator's own lifecycle helpers: `close()` ends long polls, event streams and hung
 * requests quickly; `waitForSession` gives up at once on an item stopped before its session started;
 * `expectNoPending()` names what is left; cloud environments queue no work;
 * `enqueue()` adds items; a throwing `sessionCreated` listener never breaks session creation.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { EnvironmentWorker } from '../../src/index.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';

let emu: Emulator | undefined;
afterEach(async () => {
  await emu?.close();
  emu = undefined;
});

describe('close()', () => {
  it('ends an open long poll, an open event stream and a hung request within a few hundred ms', async () => {
    emu = await startEmulator({ mountRoot: '/nonexistent-mount-root' });
    const { sessionId } = await emu.createSession();
    const env = emu.client({ apiKey: null, authToken: emu.environmentKey, maxRetries: 0 });
    await env.beta.environments.work.poll(emu.environmentId); // take the only item
    const poll = env.beta.environments.work.poll(emu.environmentId, { block_ms: 999 }).then(
      (v) => ({ value: v }),
      (e: unknown) => ({ error: e }),
    );
    const stream = await fetch(`${emu.baseURL}/v1/sessions/${sessionId}/events/stream`, {
      headers: { authorization: `Bearer ${emu.apiKey}` },
    });
    emu.faults.add({ route: /memory_stores/, hang: true });
    const hung = fetch(`${emu.baseURL}/v1/memory_stores`, { headers: { authorization: `Bearer ${emu.apiKey}` } }).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 50));
    const t = Date.now();
    await emu.close();
    const drained = stream
      .body!.getReader()
      .read()
      .then(
        () => 'ended',
        () => 'cut',
      );
    await Promise.all([poll, hung, drained]);
    expect(Date.now() - t).toBeLessThan(500);
    expect(await drained).toMatch(/ended|cut/);
    await emu.close(); // idempotent
  });

  it('interrupts waitForSession with a message saying so', async () => {
    emu = await startEmulator({ mountRoot: '/nonexistent-mount-root' });
    const { sessionId } = await emu.createSession();
    const waiting = emu.waitForSession(sessionId, { timeoutMs: 10_000 }).catch((e: Error) => e.message);
    await emu.close();
    expect(await waiting).toContain('interrupted by close()');
  });

  it('rejects waitForSession as soon as the work item is stopped while the session never started', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-wait-'));
    emu = await startEmulator({ mountRoot: dir });
    const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } });
    // Memory on, a store attached and no secret: the worker fails the item before opening the stream.
    const { sessionId, workId } = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [{ tool: 'bash', input: { command: 'true' } }],
      secret: false,
    });
    const worker = new EnvironmentWorker({
      client: emu.client(),
      environmentId: emu.environmentId,
      environmentKey: emu.environmentKey,
      workdir: dir,
      stateDir: `${dir}-state`,
      logger: pino({ level: 'silent' }),
    });
    const running = worker.run();
    const t = Date.now();
    try {
      const err = await emu.waitForSession(sessionId, { timeoutMs: 30_000 }).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(err?.message).toContain(`work item ${workId} was stopped before the session started`);
      expect(Date.now() - t).toBeLessThan(10_000);
      expect(emu.session(sessionId).status).not.toBe('terminated');
    } finally {
      await worker.close();
      await running;
      await fs.rm(dir, { recursive: true, force: true });
      await fs.rm(`${dir}-state`, { recursive: true, force: true });
    }
  });
});

describe('bookkeeping helpers', () => {
  it('expectNoPending names queued work items and passes once they are stopped', async () => {
    emu = await startEmulator({ mountRoot: '/nonexistent-mount-root' });
    const { workId, sessionId } = await emu.createSession();
    expect(() => emu!.expectNoPending()).toThrow(new RegExp(`work item ${workId} \\(session ${sessionId}\\) is still queued`));
    emu.stopWork(workId);
    expect(() => emu!.expectNoPending()).not.toThrow();
  });

  it('queues no work for sessions on a cloud environment, and enqueue adds items on demand', async () => {
    emu = await startEmulator({ mountRoot: '/nonexistent-mount-root' });
    const cloud = emu.createEnvironment({ type: 'cloud' });
    const { workId, sessionId } = await emu.createSession({ environmentId: cloud.id });
    expect(workId).toBe('');
    expect(emu.workItems()).toHaveLength(0);
    const self = await emu.createSession();
    const again = emu.enqueue({ sessionId: self.sessionId });
    expect(emu.workItem(again)).toMatchObject({ sessionId: self.sessionId, state: 'queued', dataType: 'session' });
    const hc = emu.enqueue({ type: 'healthcheck' });
    expect(emu.workItem(hc)).toMatchObject({ dataType: 'healthcheck', secret: null });
    expect(emu.session(sessionId).workId).toBeNull();
  });

  it('keeps creating sessions when a sessionCreated listener throws', async () => {
    emu = await startEmulator({ mountRoot: '/nonexistent-mount-root' });
    const seen: string[] = [];
    emu.on('sessionCreated', () => {
      throw new Error('listener bug');
    });
    emu.on('sessionCreated', ({ sessionId }) => seen.push(sessionId));
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w.message);
    };
    process.on('warning', onWarning);
    try {
      const { sessionId } = await emu.createSession();
      await new Promise((r) => setImmediate(r));
      expect(seen).toEqual([sessionId]);
      expect(warnings.some((w) => w.includes('listener bug'))).toBe(true);
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('listeners on shared signals', () => {
  /** Run `body` and return the process warnings it raised (MaxListenersExceededWarning among them). */
  async function warningsOf(body: () => Promise<void>): Promise<string[]> {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(`${w.name}: ${w.message}`);
    };
    process.on('warning', onWarning);
    try {
      await body();
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('warning', onWarning);
    }
    return warnings;
  }

  it('a script with many steps adds no listener per step to the emulator-wide stop signal', async () => {
    emu = await startEmulator({ mountRoot: '/nonexistent-mount-root' });
    const steps = Array.from({ length: 15 }, () => ({ sleepMs: 1 }));
    const { sessionId } = await emu.createSession({ script: steps });
    const warnings = await warningsOf(async () => {
      emu!.startScript(sessionId);
      const deadline = Date.now() + 5_000;
      while (emu!.session(sessionId).status !== 'terminated' && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
    });
    expect(emu.session(sessionId).status).toBe('terminated');
    expect(warnings.filter((w) => w.includes('MaxListeners'))).toEqual([]);
  });

  it('many requests in flight at once (the SDK memory sync runs up to 32) raise no listener-leak warning', async () => {
    emu = await startEmulator({ mountRoot: '/nonexistent-mount-root', latencyMs: 100 });
    const store = await emu.createMemoryStore({ name: 'wide', memories: { '/a.md': 'a' } });
    const client = emu.client({ maxRetries: 0 });
    const warnings = await warningsOf(async () => {
      await Promise.all(Array.from({ length: 32 }, () => client.beta.memoryStores.memories.list(store.id)));
    });
    expect(warnings.filter((w) => w.includes('MaxListeners'))).toEqual([]);
  });
});
