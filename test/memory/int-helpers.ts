/**
 * Shared set-up of the memory integration tests: an emulator on 127.0.0.1:0, a temp folder as the
 * mount parent, a session whose sessions token the library uses (as a worker would), and a pino
 * logger whose lines the tests can read.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import type Anthropic from '@anthropic-ai/sdk';
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';
import pino from 'pino';
import { MemoryMountError } from '../../src/errors.js';
import { startEmulator } from '../../src/testing/index.js';
import type { Logger } from '../../src/internal/logger.js';

export type Emu = Awaited<ReturnType<typeof startEmulator>>;

export interface LogLine {
  level: number;
  msg: string;
  [k: string]: unknown;
}

export function captureLogger(): { logger: Logger; lines: LogLine[]; warnings: () => string[] } {
  const lines: LogLine[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) lines.push(JSON.parse(l) as LogLine);
      cb();
    },
  });
  const logger = pino({ level: 'debug' }, sink);
  return { logger, lines, warnings: () => lines.filter((l) => l.level >= 40).map((l) => l.msg) };
}

export interface Harness {
  emu: Emu;
  tmp: string;
  mountRoot: string;
  stateDir: string;
  cleanup(): Promise<void>;
}

export async function harness(opts: Parameters<typeof startEmulator>[0] = {}): Promise<Harness> {
  const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-mem-int-'));
  const mountRoot = path.join(tmp, 'mnt');
  const stateDir = path.join(tmp, 'state');
  await fsp.mkdir(mountRoot);
  const emu = await startEmulator({ mountRoot, latencyMs: 0, ...opts });
  return {
    emu,
    tmp,
    mountRoot,
    stateDir,
    cleanup: async () => {
      emu.faults.clear();
      await emu.close();
      await fsp.rm(tmp, { recursive: true, force: true });
    },
  };
}

/** Create a session on the emulator and return it as the worker sees it, with a sessions-token client. */
export async function openSession(
  emu: Emu,
  resources: Array<{ memoryStoreId: string; access?: 'read_write' | 'read_only'; mountPath?: string | null }>,
  clientOptions: { maxRetries?: number } = {},
): Promise<{ client: Anthropic; session: BetaManagedAgentsSession }> {
  const { sessionId } = await emu.createSession({ resources });
  const client = emu.sessionClient(sessionId, clientOptions);
  const session = await client.beta.sessions.retrieve(sessionId);
  return { client, session };
}

/** `{ 'rel/path': content }` of every regular file below `root` (marker excluded). */
export async function readTree(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  async function walk(dir: string, prefix: string): Promise<void> {
    for (const ent of await fsp.readdir(dir, { withFileTypes: true })) {
      const rel = prefix ? `${prefix}/${ent.name}` : ent.name;
      if (ent.isDirectory()) await walk(path.join(dir, ent.name), rel);
      else if (ent.isFile() && rel !== '.anthropic-memory-store') out[rel] = await fsp.readFile(path.join(dir, ent.name), 'utf8');
    }
  }
  await walk(root, '');
  return out;
}

export function memoriesOf(n: number, prefix = 'm'): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < n; i++) out[`/${prefix}/${String(i).padStart(4, '0')}.md`] = `memory ${i} of ${prefix}\n`;
  return out;
}

/** A clock the test moves by hand. */
export function manualClock(startMs = 1_000_000): { now(): number; advance(ms: number): void } {
  let t = startMs;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

/** The MemoryMountError `p` rejects with; any other outcome fails the test. */
export async function mountError(p: Promise<unknown>): Promise<MemoryMountError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof MemoryMountError) return e;
    throw e;
  }
  throw new Error('expected a MemoryMountError; the mount succeeded');
}
