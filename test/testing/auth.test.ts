/**
 * Pins the emulator's credential rules: the memory endpoints refuse the
 * environment key, unknown or missing credentials get 401, a sessions token reaches only its own
 * session, work item and attached stores (writes only where attached read_write), set-up calls
 * need the API key, and both `Authorization: Bearer` and `x-api-key` are accepted. The request
 * log records the credential kind, never the secret.
 */
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { expectApiError } from './helpers.js';

let emu: Emulator;
let storeA: string;
let storeB: string;
let storeRO: string;
let sessionA: string;
let sessionB: string;

beforeAll(async () => {
  emu = await startEmulator({ mountRoot: '/nonexistent-mount-root' });
  storeA = (await emu.createMemoryStore({ name: 'A', memories: { '/a.md': 'a' } })).id;
  storeB = (await emu.createMemoryStore({ name: 'B', memories: { '/b.md': 'b' } })).id;
  storeRO = (await emu.createMemoryStore({ name: 'RO', memories: { '/r.md': 'r' } })).id;
  sessionA = (
    await emu.createSession({
      resources: [
        { memoryStoreId: storeA, access: 'read_write' },
        { memoryStoreId: storeRO, access: 'read_only' },
      ],
    })
  ).sessionId;
  sessionB = (await emu.createSession({ resources: [{ memoryStoreId: storeB }] })).sessionId;
});
afterAll(async () => {
  await emu.close();
});

function bearer(token: string): Anthropic {
  return new Anthropic({ apiKey: null, authToken: token, baseURL: emu.baseURL, maxRetries: 0, logLevel: 'off' });
}

describe('the environment key', () => {
  it('is refused on every memory endpoint with 403 permission_error', async () => {
    const env = bearer(emu.environmentKey);
    await expectApiError(env.beta.memoryStores.memories.list(storeA), 403, 'permission_error');
    await expectApiError(env.beta.memoryStores.memories.create(storeA, { path: '/x', content: 'x' }), 403, 'permission_error');
    await expectApiError(env.beta.memoryStores.retrieve(storeA), 403, 'permission_error');
  });

  it('is accepted on the session and its events', async () => {
    const env = bearer(emu.environmentKey);
    expect((await env.beta.sessions.retrieve(sessionA)).id).toBe(sessionA);
    const page = await env.beta.sessions.events.list(sessionA);
    expect(Array.isArray(page.data)).toBe(true);
  });

  it('of another environment is refused on this environment poll', async () => {
    const other = emu.createEnvironment({ name: 'other' });
    await expectApiError(bearer(other.key).beta.environments.work.poll(emu.environmentId), 403, 'permission_error');
  });

  it('of another environment is refused on this environment work list and stats', async () => {
    const other = emu.createEnvironment({ name: 'other' });
    await expectApiError(bearer(other.key).beta.environments.work.list(emu.environmentId), 403, 'permission_error');
    await expectApiError(bearer(other.key).beta.environments.work.stats(emu.environmentId), 403, 'permission_error');
    // Its own key lists the work of this environment.
    const page = await bearer(emu.environmentKey).beta.environments.work.list(emu.environmentId);
    expect(page.data.map((w) => w.data.id)).toEqual(expect.arrayContaining([sessionA, sessionB]));
  });
});

describe('the API key', () => {
  it('is refused on the work list, which takes the environment key (SDK docs: "It rejects a Claude API key")', async () => {
    const err = await expectApiError(emu.client({ maxRetries: 0 }).beta.environments.work.list(emu.environmentId), 403, 'permission_error');
    expect(err.message).toContain('environment key');
  });
});

describe('unknown and missing credentials', () => {
  it('answers 401 authentication_error for a key the emulator did not issue', async () => {
    const stranger = bearer('sk-ant-api-not-issued');
    await expectApiError(stranger.beta.memoryStores.memories.list(storeA), 401, 'authentication_error');
    await expectApiError(stranger.beta.environments.work.poll(emu.environmentId), 401, 'authentication_error');
    expect(emu.requests.at(-1)?.credential).toBe('unknown');
  });

  it('answers 401 when no credential is sent', async () => {
    const res = await fetch(`${emu.baseURL}/v1/sessions/${sessionA}`);
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe('authentication_error');
    expect(res.headers.get('request-id')).toMatch(/^req_/);
    expect(emu.requests.at(-1)?.credential).toBe('none');
  });

  it('accepts the API key in x-api-key as well as in Authorization: Bearer', async () => {
    const res = await fetch(`${emu.baseURL}/v1/memory_stores/${storeA}`, { headers: { 'x-api-key': emu.apiKey } });
    expect(res.status).toBe(200);
    const viaBearer = await fetch(`${emu.baseURL}/v1/memory_stores/${storeA}`, { headers: { authorization: `Bearer ${emu.apiKey}` } });
    expect(viaBearer.status).toBe(200);
  });
});

describe('a sessions token', () => {
  it('reads and writes the stores attached to its own session', async () => {
    const token = emu.sessionClient(sessionA, { maxRetries: 0 });
    const listed = await token.beta.memoryStores.memories.list(storeA);
    expect(listed.data.map((m) => m.path)).toEqual(['/a.md']);
    await token.beta.memoryStores.memories.create(storeA, { path: '/from-token.md', content: 't' });
    expect(emu.memories(storeA)['/from-token.md']).toBe('t');
  });

  it('reads but cannot write a store attached read_only', async () => {
    const token = emu.sessionClient(sessionA, { maxRetries: 0 });
    expect((await token.beta.memoryStores.memories.list(storeRO)).data).toHaveLength(1);
    await expectApiError(token.beta.memoryStores.memories.create(storeRO, { path: '/w.md', content: 'w' }), 403, 'permission_error');
    expect(emu.memories(storeRO)).toEqual({ '/r.md': 'r' });
  });

  it('is refused on a store attached to another session', async () => {
    const token = emu.sessionClient(sessionA, { maxRetries: 0 });
    await expectApiError(token.beta.memoryStores.memories.list(storeB), 403, 'permission_error');
  });

  it('is refused on another session and on another work item', async () => {
    const token = emu.sessionClient(sessionA, { maxRetries: 0 });
    await expectApiError(token.beta.sessions.retrieve(sessionB), 403, 'permission_error');
    await expectApiError(token.beta.sessions.events.list(sessionB), 403, 'permission_error');
    const workB = emu.session(sessionB).workId!;
    await expectApiError(
      token.beta.environments.work.heartbeat(workB, { environment_id: emu.environmentId, expected_last_heartbeat: 'NO_HEARTBEAT' }),
      403,
      'permission_error',
    );
  });

  it('cannot create sessions or memory stores (set-up needs the API key)', async () => {
    const token = emu.sessionClient(sessionA, { maxRetries: 0 });
    await expectApiError(token.beta.memoryStores.create({ name: 'nope' }), 403, 'permission_error');
    await expectApiError(token.beta.sessions.create({ agent: 'agent_x', environment_id: emu.environmentId }), 403, 'permission_error');
  });

  it('is logged by kind only: no request record contains a credential value', async () => {
    const secrets = [emu.apiKey, emu.environmentKey, emu.sessionsToken(sessionA)!, emu.sessionsToken(sessionB)!];
    const log = JSON.stringify(emu.requests);
    for (const secret of secrets) expect(log).not.toContain(secret);
    expect(new Set(emu.requests.map((r) => r.credential))).toEqual(
      new Set(['console', 'environment_key', 'sessions_token', 'unknown', 'none']),
    );
  });
});
