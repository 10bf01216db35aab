// Pins that API failures are recognised whatever copy of @anthropic-ai/sdk threw them: errors made
// by a second copy of the SDK (as an app on another 1.x version or with a bundled SDK holds) are
// classified exactly as our own copy's, and a worker given a client of that copy stops on a 401 at
// poll with the fatal RemoteApiError (which the CLI turns into its exit code 4) instead of retrying,
// and so does a launcher.
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyFailure, errorTypeOf, isApiError, statusOf, toRemoteApiError } from '../../src/api/classify.js';
import { RemoteApiError } from '../../src/errors.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { Launcher } from '../../src/launcher/index.js';
import { EnvironmentWorker } from '../../src/worker/environment-worker.js';
import { copySdk, importSdkCopy, type SdkCopy } from './sdk-copy.js';

type Sdk = typeof import('@anthropic-ai/sdk');

let copy: SdkCopy;
let other: Sdk;
beforeAll(async () => {
  copy = await copySdk();
  other = await importSdkCopy(copy);
}, 60_000);
afterAll(async () => {
  await copy?.remove();
});

function otherApiError(status: number, type = 'api_error'): Error {
  return other.APIError.generate(status, { type: 'error', error: { type, message: 'x' } }, 'x', new Headers({ 'request-id': 'req_other' }));
}

describe('errors thrown by a second SDK copy', () => {
  it('come from classes distinct from the ones this library imports', async () => {
    const ours = await import('@anthropic-ai/sdk');
    expect(other.APIError).not.toBe(ours.APIError);
    expect(otherApiError(401)).not.toBeInstanceOf(ours.APIError);
  });

  const rows: Array<{ description: string; make: () => unknown; expected: string; status: number | undefined }> = [
    { description: '401 bad credential is fatal', make: () => otherApiError(401), expected: 'fatal', status: 401 },
    { description: '404 unknown environment is fatal', make: () => otherApiError(404), expected: 'fatal', status: 404 },
    { description: '409 race is transient', make: () => otherApiError(409), expected: 'transient', status: 409 },
    { description: '429 rate limit is transient', make: () => otherApiError(429), expected: 'transient', status: 429 },
    { description: '503 is transient', make: () => otherApiError(503), expected: 'transient', status: 503 },
    {
      description: 'a network failure is transient',
      make: () => new other.APIConnectionError({ message: 'reset' }),
      expected: 'transient',
      status: undefined,
    },
    {
      description: 'a client timeout is transient',
      make: () => new other.APIConnectionTimeoutError(),
      expected: 'transient',
      status: undefined,
    },
    { description: 'our own abort is aborted', make: () => new other.APIUserAbortError(), expected: 'aborted', status: undefined },
  ];
  it.each(rows)('$description', ({ make, expected, status }) => {
    const e = make();
    expect(isApiError(e)).toBe(true);
    expect(classifyFailure(e)).toBe(expected);
    expect(statusOf(e)).toBe(status);
  });

  it('keep their error type, status and request id through toRemoteApiError', () => {
    const e = otherApiError(409, 'memory_precondition_failed_error');
    expect(errorTypeOf(e)).toBe('memory_precondition_failed_error');
    const remote = toRemoteApiError(otherApiError(401), 'polling');
    expect(remote).toMatchObject({ status: 401, requestId: 'req_other', retryable: false });
  });

  it('are not confused with plain errors that have no response shape', () => {
    expect(isApiError(new Error('boom'))).toBe(false);
    expect(isApiError({ status: 401, headers: {}, error: {} })).toBe(false);
  });
});

describe('a worker given a client from a second SDK copy', () => {
  let emu: Emulator;
  let tmp: string;
  beforeAll(async () => {
    tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-second-sdk-'));
    emu = await startEmulator({ mountRoot: tmp, latencyMs: 0 });
  });
  afterAll(async () => {
    await emu?.close();
    await fsp.rm(tmp, { recursive: true, force: true });
  });

  it('stops run() with a fatal RemoteApiError on a 401 at poll instead of retrying', async () => {
    const client = new other.default({ apiKey: 'sk-ant-api-operator-key', baseURL: emu.baseURL, logLevel: 'off' });
    const worker = new EnvironmentWorker({
      // The app's client: the worker's options accept it at run time whatever copy made it.
      client: client as unknown as ConstructorParameters<typeof EnvironmentWorker>[0]['client'],
      environmentId: emu.environmentId,
      environmentKey: 'not-a-real-key',
      workdir: tmp,
      memorySyncIntervalMs: null,
      logger: pino({ level: 'silent' }),
    });
    let pollFailures = 0;
    worker.on('pollFailed', () => pollFailures++);
    const outcome = await Promise.race([
      worker.run().then(
        () => 'returned',
        (e: unknown) => e,
      ),
      new Promise((resolve) => setTimeout(() => resolve('still retrying after 10 s'), 10_000)),
    ]);
    await worker.close();
    expect(outcome).toBeInstanceOf(RemoteApiError);
    expect(outcome).toMatchObject({ status: 401, retryable: false });
    expect(pollFailures).toBe(0);
  }, 30_000);

  it('lets a launcher stop on a 401 at poll instead of retrying', async () => {
    const client = new other.default({ apiKey: 'sk-ant-api-operator-key', baseURL: emu.baseURL, logLevel: 'off' });
    const launcher = new Launcher({
      client: client as unknown as ConstructorParameters<typeof Launcher>[0]['client'],
      environmentId: emu.environmentId,
      environmentKey: 'not-a-real-key',
      command: 'true',
      logger: pino({ level: 'silent' }),
    });
    const outcome = await Promise.race([
      launcher.run().then(
        () => 'returned',
        (e: unknown) => e,
      ),
      new Promise((resolve) => setTimeout(() => resolve('still retrying after 10 s'), 10_000)),
    ]);
    await launcher.close();
    expect(outcome).toBeInstanceOf(RemoteApiError);
    expect(outcome).toMatchObject({ status: 401, retryable: false });
  }, 30_000);
});
