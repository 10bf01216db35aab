/**
 * Pieces of the crash test: the seeded kill plan, a child worker process whose events the test
 * reads line by line, and a reader of the agent's files on disk.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { taggedFiles as taggedFilesWith } from '../../bench/soak/tagged-files.js';
import { createPrng } from '../../src/testing/emulator/prng.js';

export const PHASES = ['download', 'edit', 'uploads', 'final', 'unmount'] as const;
export type Phase = (typeof PHASES)[number];

export interface KillPoint {
  index: number;
  phase: Phase;
  /** Files the agent writes before the kill. */
  writes: number;
  /** Requests of the hung kind let through before the one that hangs (download pages, uploads). */
  skip: number;
  /** Extra wait between the trigger and the SIGKILL, in ms. */
  delayMs: number;
}

/** `count` kill points, every phase about as often, in a seeded random order with seeded parameters. */
export function planKills(seed: number, count: number, only: readonly Phase[] = PHASES): KillPoint[] {
  const random = createPrng(seed);
  const phases: Phase[] = Array.from({ length: count }, (_, i) => only[i % only.length]!);
  for (let i = phases.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [phases[i], phases[j]] = [phases[j]!, phases[i]!];
  }
  return phases.map((phase, index) => {
    const writes = 1 + Math.floor(random() * 4);
    const skip = phase === 'download' ? 1 + Math.floor(random() * 2) : Math.floor(random() * writes);
    return { index, phase, writes, skip, delayMs: Math.floor(random() * 30) };
  });
}

export const CRASH_TAG = 'crash-edit:';

/** `{ rel: content }` of every regular file below `root` that an agent wrote (tagged content). */
export function taggedFiles(root: string): Record<string, string> {
  return Object.fromEntries(taggedFilesWith(root, CRASH_TAG));
}

/** Contents of every regular file below `dir`, but in the folders of `skip`. */
export function allContents(dir: string, skip: readonly string[] = []): Set<string> {
  const out = new Set<string>();
  const walk = (d: string): void => {
    if (skip.includes(d)) return;
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const ent of entries) {
      const p = path.join(d, ent.name);
      if (ent.isDirectory()) walk(p);
      else if (ent.isFile()) {
        try {
          out.add(fs.readFileSync(p, 'utf8'));
        } catch {
          /* unreadable: not a copy we can count */
        }
      }
    }
  };
  walk(dir);
  return out;
}

export interface ChildEvent {
  event: string;
  pid: number;
  workId?: string;
  sessionId?: string;
  storeId?: string;
  phase?: string;
  error?: string;
  [k: string]: unknown;
}

const FIXTURE = fileURLToPath(new URL('./fixtures/crash-worker.ts', import.meta.url));

/** One worker process of a lane. */
export class WorkerChild {
  readonly proc: ChildProcess;
  readonly events: ChildEvent[] = [];
  stderr = '';
  readonly exited: Promise<void>;
  #waiters: Array<() => void> = [];

  constructor(env: Record<string, string>) {
    this.proc = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buf = '';
    this.proc.stdout!.on('data', (chunk: Buffer) => {
      buf += chunk.toString('utf8');
      let nl: number;
      while ((nl = buf.indexOf('\n')) !== -1) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        try {
          this.events.push(JSON.parse(line) as ChildEvent);
        } catch {
          this.stderr += `(stdout) ${line}\n`;
        }
        for (const wake of this.#waiters.splice(0)) wake();
      }
    });
    this.proc.stderr!.on('data', (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString('utf8')).slice(-20_000);
    });
    this.exited = new Promise((resolve) => this.proc.once('exit', () => resolve()));
  }

  /** Resolves with the first event (seen or to come) that matches, or rejects after `timeoutMs`. */
  async waitFor(match: (e: ChildEvent) => boolean, timeoutMs: number, what: string): Promise<ChildEvent> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.events.find(match);
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0 || this.proc.exitCode !== null || this.proc.signalCode !== null) {
        throw new Error(`crash worker ${this.proc.pid}: no ${what} within ${timeoutMs} ms; stderr:\n${this.stderr.slice(-2_000)}`);
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 200));
        this.#waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  async kill(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
    await this.exited;
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 15_000);
    await this.exited;
    clearTimeout(timer);
  }
}
