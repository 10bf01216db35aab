/**
 * Shared set-up of the worker integration tests: an emulator on 127.0.0.1:0, a temp folder holding
 * the mount parent, the workdir and the state dir, a real SDK client, and a pino logger writing to
 * an in-memory sink so tests can read (and search) every line the library logged.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import Anthropic from '@anthropic-ai/sdk';
import pino from 'pino';
import type { Logger } from '../../src/internal/logger.js';
import { startEmulator, type Emulator, type EmulatorOptions } from '../../src/testing/index.js';
import { EnvironmentWorker, type EnvironmentWorkerOptions, type WorkerInternals } from '../../src/worker/environment-worker.js';

export interface Capture {
  logger: Logger;
  /** Every raw JSON line, as written. */
  raw: string[];
  lines: Array<{ level: number; msg: string; [k: string]: unknown }>;
}

/** A pino logger without redaction, so a test sees exactly what the code logged. */
export function captureLogger(level: pino.LevelWithSilent = 'debug'): Capture {
  const raw: string[] = [];
  const lines: Capture['lines'] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) {
        if (!l.trim()) continue;
        raw.push(l);
        lines.push(JSON.parse(l) as Capture['lines'][number]);
      }
      cb();
    },
  });
  return { logger: pino({ level }, sink), raw, lines };
}

export interface Harness {
  emu: Emulator;
  tmp: string;
  mountRoot: string;
  workdir: string;
  stateDir: string;
  capture: Capture;
  client: Anthropic;
  /** A worker on this emulator with test-friendly defaults; `overrides` win. */
  worker(overrides?: Partial<EnvironmentWorkerOptions>, internals?: WorkerInternals): EnvironmentWorker;
  cleanup(): Promise<void>;
}

export async function harness(opts: EmulatorOptions = {}): Promise<Harness> {
  const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-worker-'));
  const mountRoot = path.join(tmp, 'mnt');
  const workdir = path.join(tmp, 'work');
  const stateDir = path.join(tmp, 'state');
  await fsp.mkdir(mountRoot);
  await fsp.mkdir(workdir);
  const emu = await startEmulator({ mountRoot, latencyMs: 0, leaseTtlSeconds: 4, ...opts });
  const capture = captureLogger();
  const client = new Anthropic({ apiKey: 'sk-ant-api-operator-key', baseURL: emu.baseURL, logLevel: 'off' });
  const workers: EnvironmentWorker[] = [];
  return {
    emu,
    tmp,
    mountRoot,
    workdir,
    stateDir,
    capture,
    client,
    worker(overrides = {}, internals = {}) {
      // An override set to undefined leaves the option out (the constructor refuses an option
      // passed as undefined, which is how an unset variable reaches it).
      const options: EnvironmentWorkerOptions = {
        client,
        environmentId: emu.environmentId,
        environmentKey: emu.environmentKey,
        workdir,
        stateDir,
        memorySyncIntervalMs: 5_000,
        finalFlushMs: 5_000,
        logger: capture.logger,
        ...overrides,
      };
      for (const [k, v] of Object.entries(overrides)) if (v === undefined) delete options[k as keyof EnvironmentWorkerOptions];
      const w = new EnvironmentWorker(options, internals);
      workers.push(w);
      return w;
    },
    async cleanup() {
      emu.faults.clear();
      await Promise.all(workers.map((w) => w.close()));
      await emu.close();
      // Retried: a worker whose memory finish overran its bound may still be writing the cache.
      await fsp.rm(tmp, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
    },
  };
}

export async function waitFor(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export async function exists(p: string): Promise<boolean> {
  return fsp.lstat(p).then(
    () => true,
    () => false,
  );
}

/** Claim the next work item the way an external dispatcher would: poll and ack with the environment key. */
export async function claimNext(h: Harness): Promise<{ workId: string; sessionId: string; environmentId: string; secret: string | null }> {
  const envClient = new Anthropic({ authToken: h.emu.environmentKey, apiKey: null, baseURL: h.emu.baseURL, logLevel: 'off' });
  for (let i = 0; i < 20; i++) {
    const work = await envClient.beta.environments.work.poll(h.emu.environmentId, { block_ms: 999 });
    if (!work) continue;
    await envClient.beta.environments.work.ack(work.id, { environment_id: work.environment_id });
    return {
      workId: work.id,
      sessionId: work.data.id,
      environmentId: work.environment_id,
      secret: (work as { secret?: string | null }).secret ?? null,
    };
  }
  throw new Error('no work item to claim');
}

export function stopRequests(h: Harness, workId: string) {
  return h.emu.requests.filter((r) => r.route.endsWith('/stop') && r.path.includes(workId));
}

/** What `p` rejects with, or `undefined` when it resolves. */
export async function rejectionOf(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (e: unknown) => e,
  );
}
