// Pins handleItem(): with no arguments it serves an already-claimed item from the ANTHROPIC_*
// variables alone (as a launcher hands it over), a missing required value is named — with its
// variable — in the error, before anything is sent, and (as the official worker) a failed item
// rejects — with a WorkItemFailedError carrying the cause and the outcome — after its teardown.
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { APIError } from '@anthropic-ai/sdk';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMountError, MissingInputError, RemoteApiError, WorkItemFailedError } from '../../src/errors.js';
import { claimNext, exists, harness, stopRequests, type Harness, rejectionOf } from './helpers.js';

const VARS = [
  'ANTHROPIC_WORK_ID',
  'ANTHROPIC_ENVIRONMENT_ID',
  'ANTHROPIC_SESSION_ID',
  'ANTHROPIC_ENVIRONMENT_KEY',
  'ANTHROPIC_WORK_SECRET',
];

describe('EnvironmentWorker.handleItem', () => {
  let h: Harness;
  const saved: Record<string, string | undefined> = {};
  beforeEach(async () => {
    h = await harness();
    for (const v of VARS) {
      saved[v] = process.env[v];
      delete process.env[v];
    }
  });
  afterEach(async () => {
    for (const v of VARS) {
      if (saved[v] === undefined) delete process.env[v];
      else process.env[v] = saved[v];
    }
    await h.cleanup();
  });

  it('serves a claimed item from the ANTHROPIC_* variables only', async () => {
    const { emu } = h;
    const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } });
    const dir = path.join(h.mountRoot, 'notes');
    const { sessionId, workId } = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [
        { tool: 'read', input: { file_path: path.join(dir, 'a.md') } },
        { tool: 'write', input: { file_path: path.join(dir, 'b.md'), content: 'from the launcher' } },
      ],
    });
    const claimed = await claimNext(h);
    expect(claimed.workId).toBe(workId);
    process.env['ANTHROPIC_WORK_ID'] = claimed.workId;
    process.env['ANTHROPIC_ENVIRONMENT_ID'] = claimed.environmentId;
    process.env['ANTHROPIC_SESSION_ID'] = claimed.sessionId;
    process.env['ANTHROPIC_ENVIRONMENT_KEY'] = emu.environmentKey;
    process.env['ANTHROPIC_WORK_SECRET'] = claimed.secret!;
    // A worker constructed without environment id or key, as in a launcher's child process.
    const worker = h.worker({ environmentId: undefined, environmentKey: undefined });
    const outcome = await worker.handleItem();

    expect(outcome).toMatchObject({ workId, sessionId, status: 'completed' });
    const done = await emu.waitForSession(sessionId, { timeoutMs: 10_000 });
    expect(done.toolResults.map((r) => [r.name, r.isError])).toEqual([
      ['read', false],
      ['write', false],
    ]);
    expect(emu.memories(store.id)).toEqual({ '/a.md': 'A', '/b.md': 'from the launcher' });
    expect(await exists(dir)).toBe(false);
    expect(emu.workItem(workId).state).toBe('stopped');
    // No poll: the item was handed over.
    expect(emu.requests.filter((r) => r.route.endsWith('/work/poll') && r.credential !== 'environment_key')).toEqual([]);
  });

  const missing = [
    { description: 'the work id', unset: 'ANTHROPIC_WORK_ID', field: 'workId' },
    { description: 'the environment id', unset: 'ANTHROPIC_ENVIRONMENT_ID', field: 'environmentId' },
    { description: 'the session id', unset: 'ANTHROPIC_SESSION_ID', field: 'sessionId' },
  ];
  for (const row of missing) {
    it(`names ${row.description} and its variable when it is missing`, async () => {
      for (const v of VARS) process.env[v] = `value-of-${v}`;
      delete process.env[row.unset];
      const worker = h.worker({ environmentId: undefined, environmentKey: undefined });
      const err = await worker.handleItem().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MissingInputError);
      expect((err as MissingInputError).field).toBe(row.field);
      expect((err as Error).message).toBe(`handleItem: ${row.field} is required; pass it or set ${row.unset}`);
      expect(h.emu.requests).toEqual([]);
    });
  }

  it('asks for an environment key or a secret when neither is given', async () => {
    const worker = h.worker({ environmentId: undefined, environmentKey: undefined });
    const err = await worker.handleItem({ workId: 'work_1', environmentId: 'env_1', sessionId: 'sesn_1' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MissingInputError);
    expect((err as Error).message).toContain('ANTHROPIC_ENVIRONMENT_KEY or ANTHROPIC_WORK_SECRET');
  });

  it('rejects, without sending anything, when the secret is unusable and there is no key', async () => {
    const worker = h.worker({ environmentId: undefined, environmentKey: undefined });
    const err = await rejectionOf(
      worker.handleItem({ workId: 'work_1', environmentId: 'env_1', sessionId: 'sesn_1', workSecret: 'not-a-secret' }),
    );
    expect(err).toBeInstanceOf(WorkItemFailedError);
    const failed = err as WorkItemFailedError;
    expect(failed.code).toBe('MAW_WORK_FAILED');
    expect(failed.cause).toBeInstanceOf(MissingInputError);
    expect(failed.outcome).toMatchObject({ workId: 'work_1', sessionId: 'sesn_1', status: 'failed' });
    expect(failed.outcome.error).toBe(failed.cause);
    expect(failed.message).toContain(
      'work item work_1 (its secret yields no sessions token): environmentKey is required; pass it or set ANTHROPIC_ENVIRONMENT_KEY',
    );
    expect(h.emu.requests).toEqual([]);
  });

  // Drop-in with the official worker: a failed item rejects, after its teardown (item stopped,
  // folders untouched); everything else resolves with the outcome.
  it('rejects when the mount path is taken, after stopping the item and leaving the path alone', async () => {
    const { emu } = h;
    const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } });
    const dir = path.join(h.mountRoot, 'notes');
    await fsp.mkdir(dir);
    await fsp.writeFile(path.join(dir, 'precious.txt'), 'keep me');
    const { sessionId, workId } = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [{ tool: 'bash', input: { command: 'true' } }],
      end: 'idle',
    });
    const claimed = await claimNext(h);
    const worker = h.worker({ sandbox: 'none' }); // tools in the worker: the store's folder is its mount path
    const failedEvents: unknown[] = [];
    worker.on('workFailed', (e) => failedEvents.push(e.error));
    const err = await rejectionOf(worker.handleItem({ ...claimed, workSecret: claimed.secret! }));

    expect(err).toBeInstanceOf(WorkItemFailedError);
    const failed = err as WorkItemFailedError;
    expect(failed.cause).toBeInstanceOf(MemoryMountError);
    expect(failed.message).toContain(dir);
    expect(failed.outcome).toMatchObject({ workId, sessionId, status: 'failed' });
    expect(failedEvents).toEqual([failed.cause]);
    // The teardown ran before the rejection.
    expect(stopRequests(h, workId).map((r) => r.body)).toEqual([{ force: true }]);
    expect(emu.workItem(workId).state).toBe('stopped');
    expect(await fsp.readFile(path.join(dir, 'precious.txt'), 'utf8')).toBe('keep me');
    expect(worker.activeSessions).toBe(0);
    emu.archiveSession(sessionId);
  });

  it('rejects with a RemoteApiError cause naming the step when the session cannot be fetched', async () => {
    const { emu } = h;
    const { sessionId, workId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'true' } }], end: 'idle' });
    const claimed = await claimNext(h);
    emu.faults.add({
      route: new RegExp(`^GET /v1/sessions/${sessionId}$`),
      status: 404,
      errorType: 'not_found_error',
      message: 'no such session',
    });
    const worker = h.worker();
    const err = await rejectionOf(worker.handleItem({ ...claimed, workSecret: claimed.secret! }));

    expect(err).toBeInstanceOf(WorkItemFailedError);
    const cause = (err as WorkItemFailedError).cause;
    expect(cause).toBeInstanceOf(RemoteApiError);
    expect(cause).toMatchObject({ status: 404, retryable: false });
    expect((cause as Error).message).toContain(`retrieving session ${sessionId}`);
    expect((cause as Error).cause).toBeInstanceOf(APIError);
    expect(stopRequests(h, workId).map((r) => r.body)).toEqual([{ force: true }]);
    emu.archiveSession(sessionId);
  });
});
