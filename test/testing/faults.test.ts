/**
 * Pins the emulator's fault injection and request log: status faults (by route, method, seeded
 * rate, times), latency, hang (never answered until the client gives up), dropResponse (applied,
 * then the connection is cut), leaseLost and stopWork on heartbeats, handles that retire and
 * remove rules, body rewrites (a wrong server), plus the 404 for unknown routes and the per-request log fields.
 */
import { APIConnectionError, APIConnectionTimeoutError } from '@anthropic-ai/sdk';
import type Anthropic from '@anthropic-ai/sdk';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { expectApiError } from './helpers.js';

let emu: Emulator;
let client: Anthropic;
let storeId: string;

beforeEach(async () => {
  emu = await startEmulator({ mountRoot: '/nonexistent-mount-root', seed: 42 });
  client = emu.client({ maxRetries: 0 });
  storeId = (await emu.createMemoryStore({ name: 'F', memories: { '/a.md': 'a' } })).id;
});
afterEach(async () => {
  await emu.close();
});

async function outcomes(n: number): Promise<string> {
  let out = '';
  for (let i = 0; i < n; i++) {
    try {
      await client.beta.memoryStores.memories.list(storeId);
      out += '.';
    } catch {
      out += 'x';
    }
  }
  return out;
}

describe('status faults', () => {
  it('fail about `rate` of the matching requests, identically for the same seed', async () => {
    emu.faults.add({ route: /memories/, status: 503, rate: 0.5 });
    const first = await outcomes(40);
    const failures = [...first].filter((c) => c === 'x').length;
    expect(failures).toBeGreaterThan(10);
    expect(failures).toBeLessThan(30);
    const again = await startEmulator({ mountRoot: '/nonexistent-mount-root', seed: 42 });
    try {
      const other = again.client({ maxRetries: 0 });
      const otherStore = (await again.createMemoryStore({ name: 'F' })).id;
      again.faults.add({ route: /memories/, status: 503, rate: 0.5 });
      let second = '';
      for (let i = 0; i < 40; i++)
        second += await other.beta.memoryStores.memories.list(otherStore).then(
          () => '.',
          () => 'x',
        );
      expect(second).toBe(first);
    } finally {
      await again.close();
    }
  });

  it('retire after `times` firings and answer the API error envelope', async () => {
    const handle = emu.faults.add({ route: /memories/, status: 503, times: 2 });
    const err = await expectApiError(client.beta.memoryStores.memories.list(storeId), 503, 'api_error');
    expect(err.requestID).toMatch(/^req_emu_/);
    expect(await outcomes(3)).toBe('x..');
    expect(handle.hits).toBe(2);
    expect(handle.active).toBe(false);
    expect(emu.faults.list()).toHaveLength(0);
  });

  it('let the first `skip` matching requests through, then fire (skipped ones are not hits)', async () => {
    const handle = emu.faults.add({ route: /memories/, status: 503, skip: 2, times: 2 });
    expect(await outcomes(6)).toBe('..xx..');
    expect(handle.hits).toBe(2);
    expect(() => emu.faults.add({ skip: -1 })).toThrow(ConfigError);
    expect(() => emu.faults.add({ skip: 1.5 })).toThrow(ConfigError);
  });

  it('match only the given method and route', async () => {
    emu.faults.add({ route: /\/memories$/, method: 'POST', status: 500 });
    await client.beta.memoryStores.memories.list(storeId);
    await expectApiError(client.beta.memoryStores.memories.create(storeId, { path: '/b.md', content: 'b' }), 500);
    expect(emu.memories(storeId)).toEqual({ '/a.md': 'a' });
  });

  it('stop firing once removed or cleared', async () => {
    const handle = emu.faults.add({ status: 503 });
    expect(await outcomes(1)).toBe('x');
    handle.remove();
    expect(await outcomes(1)).toBe('.');
    emu.faults.add({ status: 503 });
    emu.faults.clear();
    expect(await outcomes(1)).toBe('.');
  });

  it('are retried by the SDK like real 5xx answers', async () => {
    emu.faults.add({ route: /memories/, status: 529, times: 1 });
    const retrying = emu.client({ maxRetries: 2 });
    const page = await retrying.beta.memoryStores.memories.list(storeId);
    expect(page.data).toHaveLength(1);
    expect(emu.requests.filter((r) => r.route === 'GET /v1/memory_stores/:id/memories').map((r) => r.status)).toEqual([529, 200]);
  });
});

describe('connection faults', () => {
  it('latencyMs delays the answer', async () => {
    emu.faults.add({ route: /memories/, latencyMs: 250 });
    const t = Date.now();
    await client.beta.memoryStores.memories.list(storeId);
    expect(Date.now() - t).toBeGreaterThanOrEqual(240);
  });

  it('hang never answers: the client times out and the log marks it', async () => {
    emu.faults.add({ route: /memories/, hang: true });
    const t = Date.now();
    await expect(emu.client({ maxRetries: 0, timeout: 300 }).beta.memoryStores.memories.list(storeId)).rejects.toBeInstanceOf(
      APIConnectionTimeoutError,
    );
    expect(Date.now() - t).toBeLessThan(2_000);
    await new Promise((r) => setTimeout(r, 50));
    expect(emu.requests.at(-1)).toMatchObject({ status: 0, fault: 'hang' });
  });

  it('dropResponse applies the write and then cuts the connection', async () => {
    emu.faults.add({ route: /memories$/, method: 'POST', dropResponse: true, times: 1 });
    await expect(client.beta.memoryStores.memories.create(storeId, { path: '/lost.md', content: 'kept' })).rejects.toBeInstanceOf(
      APIConnectionError,
    );
    expect(emu.memories(storeId)['/lost.md']).toBe('kept');
    expect(emu.requests.at(-1)).toMatchObject({ status: 0, fault: 'dropResponse', body: { path: '/lost.md', content: 'kept' } });
  });
});

describe('work faults', () => {
  async function heldItem(): Promise<{ workId: string; token: Anthropic; last: string }> {
    const { workId } = await emu.createSession();
    const token = emu.sessionClient(workId, { maxRetries: 0 });
    await emu.client().beta.environments.work.ack(workId, { environment_id: emu.environmentId });
    const beat = await token.beta.environments.work.heartbeat(workId, {
      environment_id: emu.environmentId,
      expected_last_heartbeat: 'NO_HEARTBEAT',
    });
    return { workId, token, last: beat.last_heartbeat };
  }

  it('leaseLost makes the next heartbeat answer 412', async () => {
    const { workId, token, last } = await heldItem();
    emu.faults.add({ leaseLost: true, times: 1 });
    await client.beta.memoryStores.memories.list(storeId); // not a heartbeat: unaffected
    await expectApiError(
      token.beta.environments.work.heartbeat(workId, { environment_id: emu.environmentId, expected_last_heartbeat: last }),
      412,
    );
  });

  it('stopWork makes the heartbeat report stopping (or stopped with force)', async () => {
    const { workId, token, last } = await heldItem();
    emu.faults.add({ stopWork: true, times: 1 });
    const beat = await token.beta.environments.work.heartbeat(workId, { environment_id: emu.environmentId, expected_last_heartbeat: last });
    expect(beat.state).toBe('stopping');
    const second = await heldItem();
    emu.faults.add({ stopWork: { force: true }, times: 1 });
    const forced = await second.token.beta.environments.work.heartbeat(second.workId, {
      environment_id: emu.environmentId,
      expected_last_heartbeat: second.last,
    });
    expect(forced).toMatchObject({ state: 'stopped', lease_extended: false });
  });
});

describe('routing and the request log', () => {
  it('answers 404 not_found_error naming the method and path of an unknown route', async () => {
    const res = await fetch(`${emu.baseURL}/v1/nowhere?x=1`, { method: 'PUT', headers: { authorization: `Bearer ${emu.apiKey}` } });
    expect(res.status).toBe(404);
    const body = (await res.json()) as { type: string; error: { type: string; message: string }; request_id: string };
    expect(body.type).toBe('error');
    expect(body.error.type).toBe('not_found_error');
    expect(body.error.message).toContain('PUT /v1/nowhere');
    expect(body.request_id).toBe(res.headers.get('request-id'));
  });

  it('answers 400 invalid_request_error for a body that fails validation', async () => {
    const err = await expectApiError(
      client.beta.memoryStores.memories.create(storeId, { path: '/x.md', content: 'x', extra: true } as never),
      400,
      'invalid_request_error',
    );
    expect(err.message).toContain('extra');
  });

  it('records method, route template, path, query, status, credential kind, timing and body', async () => {
    emu.clearRequests();
    const before = Date.now();
    await client.beta.memoryStores.memories.list(storeId, { view: 'full', limit: 5 });
    await client.beta.memoryStores.memories.create(storeId, { path: '/c.md', content: 'c' });
    expect(emu.requests).toHaveLength(2);
    const [list, create] = emu.requests;
    expect(list).toMatchObject({
      method: 'GET',
      route: 'GET /v1/memory_stores/:id/memories',
      path: `/v1/memory_stores/${storeId}/memories`,
      query: { view: 'full', limit: '5' },
      status: 200,
      credential: 'console',
    });
    expect(list!.startedAt).toBeGreaterThanOrEqual(before);
    expect(list!.ms).toBeGreaterThanOrEqual(0);
    expect(create).toMatchObject({ route: 'POST /v1/memory_stores/:id/memories', body: { path: '/c.md', content: 'c' } });
  });
});

describe('body rewrites', () => {
  it('answer with the rewritten JSON after the request was handled, and log the fault', async () => {
    emu.faults.add({
      route: /memories$/,
      rewrite: (body) => ({ ...(body as object), next_page: 'same-cursor-forever' }),
      times: 1,
    });
    const page = await client.beta.memoryStores.memories.list(storeId);
    expect(page.next_page).toBe('same-cursor-forever');
    expect(page.data.map((m) => m.path)).toEqual(['/a.md']);
    expect(emu.requests.at(-1)?.fault).toBe('rewrite');
  });

  it('send a string as the raw body, so a malformed answer reaches the client', async () => {
    emu.faults.add({ route: /memories$/, rewrite: () => '{"data": [', times: 1 });
    const res = await client.beta.memoryStores.memories.list(storeId).asResponse();
    expect(await res.text()).toBe('{"data": [');
  });
});
