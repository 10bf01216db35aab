/**
 * Pins the emulator's answer to a request path whose percent-escapes do not decode: 400
 * `invalid_request_error` naming the path, logged, and the emulator keeps serving.
 */
import * as os from 'node:os';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';

let emu: Emulator;
beforeEach(async () => {
  emu = await startEmulator({ mountRoot: os.tmpdir() });
});
afterEach(async () => {
  await emu.close();
});

it('answers 400 to a malformed percent-escape and keeps serving', async () => {
  const bad = await fetch(`${emu.baseURL}/v1/memory_stores/%E0%A4%A/memories`, { headers: { 'x-api-key': emu.apiKey } });
  expect(bad.status).toBe(400);
  const body = (await bad.json()) as { type: string; error: { type: string; message: string } };
  expect(body.error.type).toBe('invalid_request_error');
  expect(body.error.message).toMatch(/malformed percent-escape/);
  expect(emu.requests.at(-1)?.status).toBe(400);

  const store = await emu.createMemoryStore({ name: 'Still here', memories: { '/a.md': 'a' } });
  const good = await fetch(`${emu.baseURL}/v1/memory_stores/${store.id}`, { headers: { 'x-api-key': emu.apiKey } });
  expect(good.status).toBe(200);
});
