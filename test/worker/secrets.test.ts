// Pins "never log a credential": several sessions — stores mounted and synced, an item without a
// secret failing, a malformed secret falling back to the key, handleItem with a forwarded
// secret, a lease lost — run with a debug-level logger that has no redaction (the library's own
// lines and the SDK's, routed into the same sink); no line holds the environment key, a raw work
// secret or a sessions token.
import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimNext, harness, type Harness } from './helpers.js';

describe('credentials in logs', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness({ leaseTtlSeconds: 2 });
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('never appear in any log line across several sessions', async () => {
    const { emu, capture } = h;
    const client = new Anthropic({
      apiKey: 'sk-ant-api-operator-key',
      baseURL: emu.baseURL,
      logger: capture.logger.child({ component: 'sdk' }),
      logLevel: 'info',
    });
    const store = await emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'A' } });
    const dir = path.join(h.mountRoot, 'notes');
    const secrets: string[] = [emu.environmentKey];
    const remember = (workId: string): void => {
      for (const s of [emu.workSecret(workId), emu.sessionsToken(workId)]) if (s) secrets.push(s);
    };

    // 1. run(): a synced session, a no-secret failure, then a plain session.
    const a = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [
        { tool: 'write', input: { file_path: path.join(dir, 'b.md'), content: 'B' } },
        { tool: 'read', input: { file_path: path.join(dir, 'b.md') } },
      ],
    });
    const b = await emu.createSession({ resources: [{ memoryStoreId: store.id }], script: [], secret: false, end: 'idle' });
    const c = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo hi' } }] });
    for (const s of [a, b, c]) remember(s.workId);
    const worker = h.worker({ client });
    const running = worker.run();
    await emu.waitForSession(c.sessionId, { timeoutMs: 20_000 });
    await worker.close();
    await running;
    emu.archiveSession(b.sessionId);

    // 2. handleItem() with a forwarded secret, then with a malformed one, then a lost lease.
    const d = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo d' } }] });
    remember(d.workId);
    const claimedD = await claimNext(h);
    const handler = h.worker({ client });
    expect((await handler.handleItem({ ...claimedD, workSecret: claimedD.secret! })).status).toBe('completed');

    const e = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo e' } }] });
    remember(e.workId);
    const claimedE = await claimNext(h);
    const malformed = 'bm90LWpzb24tYnV0LXN0aWxsLWEtc2VjcmV0';
    secrets.push(malformed);
    expect((await handler.handleItem({ ...claimedE, workSecret: malformed })).status).toBe('completed');

    let fWork = '';
    const f = await emu.createSession({
      script: [{ tool: 'bash', input: { command: 'true' } }, { console: (x) => x.loseLease(fWork) }, { sleepMs: 20_000 }],
      end: 'idle',
    });
    remember(f.workId);
    fWork = f.workId;
    const claimedF = await claimNext(h);
    expect((await handler.handleItem({ ...claimedF, workSecret: claimedF.secret! })).status).toBe('lease_lost');
    emu.archiveSession(f.sessionId);

    // The capture really saw the sessions (so an empty log cannot pass), including the fallback warning.
    expect(capture.raw.length).toBeGreaterThan(50);
    expect(capture.lines.some((l) => /falling back to the environment key/.test(l.msg))).toBe(true);
    expect(capture.lines.some((l) => l['component'] === 'sdk')).toBe(true);
    expect(secrets.length).toBeGreaterThanOrEqual(12);
    for (const line of capture.raw) {
      for (const s of secrets) expect(line.includes(s), `a log line contains a credential: ${line.slice(0, 200)}`).toBe(false);
    }
  });
});
