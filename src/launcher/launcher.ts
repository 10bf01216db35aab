import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import type Anthropic from '@anthropic-ai/sdk';
import { ConfigError, coerceError } from '../errors.js';
import { linkAbort } from '../internal/abort.js';
import { monotonicClock } from '../internal/clock.js';
import { resolveLogger, type Logger } from '../internal/logger.js';
import { defaultWorkerId, Poller, type ClaimedWork } from '../worker/poller.js';
import { scopedClient } from '../worker/scoped-client.js';

/** The six variables a sandbox receives; `handle` (or `EnvironmentWorker.handleItem()`) reads them. */
export const SANDBOX_ENV_VARS = [
  'ANTHROPIC_WORK_ID',
  'ANTHROPIC_ENVIRONMENT_ID',
  'ANTHROPIC_SESSION_ID',
  'ANTHROPIC_ENVIRONMENT_KEY',
  'ANTHROPIC_WORK_SECRET',
  'ANTHROPIC_BASE_URL',
] as const;

export interface LauncherOptions {
  /** An SDK client; polls go through a copy keyed with `environmentKey`, and its base URL is handed to sandboxes. */
  client: Anthropic;
  environmentId: string;
  environmentKey: string;
  /**
   * Shell command (run with `/bin/sh -c`) that starts one sandbox for one item and **returns when
   * that sandbox has exited**, e.g. `docker run --rm … managed-agents-worker handle` or a script that
   * creates a Kubernetes Job and waits for it. The six `ANTHROPIC_*` variables are in its environment.
   */
  command: string;
  /** Sandboxes running at once. Default 1, at most 256. */
  concurrency?: number;
  /** Base environment of each sandbox command. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Where sandbox output goes. Default `inherit` (this process's stdout/stderr). */
  stdio?: 'inherit' | 'ignore';
  /** After close(), sandboxes still running this long after their SIGTERM get SIGKILL. Default 60 000. */
  killAfterMs?: number;
  workerId?: string;
  logger?: Logger;
}

export interface SandboxExit {
  workId: string;
  sessionId: string | undefined;
  code: number | null;
  signal: NodeJS.Signals | null;
  durationMs: number;
}

export interface LauncherEventMap {
  launched: [{ workId: string; sessionId: string | undefined; pid: number | undefined }];
  exited: [SandboxExit];
  closing: [{}];
}

/**
 * One sandbox per work item: claims items with the environment key and starts `command` for each,
 * passing the item in six `ANTHROPIC_*` variables **including the work secret**.
 *
 * Contract: the sandbox owns the item. Its `handle` process heartbeats the lease, runs the session,
 * syncs memory and stops the item; the launcher never heartbeats or stops an item itself, so a
 * launch command that returns early cannot get its session stopped. An item counts as finished
 * (its concurrency slot is freed) when the launch command exits, so make the command wait for
 * the sandbox (`docker run` without `-d`; `kubectl create job …` followed by `kubectl wait`).
 */
export class Launcher extends EventEmitter<LauncherEventMap> {
  readonly workerId: string;
  readonly #o: Required<Pick<LauncherOptions, 'concurrency' | 'stdio' | 'killAfterMs'>> & LauncherOptions;
  readonly #log: Logger;
  /**
   * Running sandbox commands, keyed per launch: the API may hand the same item out again (its lease
   * lapsed while a slow sandbox was starting), and each of its sandboxes must be counted, signalled
   * and waited for.
   */
  readonly #children = new Map<number, { child: ChildProcess; exited: Promise<void> }>();
  #launches = 0;
  readonly #closeCtrl = new AbortController();
  #slotFreed: (() => void) | undefined;
  #closing: Promise<void> | undefined;
  #running: Promise<void> | undefined;

  constructor(options: LauncherOptions) {
    super();
    const concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256) {
      throw new ConfigError(`Launcher: concurrency: expected an integer from 1 to 256, got ${String(concurrency)}`);
    }
    for (const key of ['environmentId', 'environmentKey', 'command'] as const) {
      if (!options[key]) throw new ConfigError(`Launcher: ${key} is required; pass it (the CLI reads ${key === 'command' ? '--on-work' : 'ANTHROPIC_' + (key === 'environmentId' ? 'ENVIRONMENT_ID' : 'ENVIRONMENT_KEY')})`);
    }
    this.#o = { ...options, concurrency, stdio: options.stdio ?? 'inherit', killAfterMs: options.killAfterMs ?? 60_000 };
    this.workerId = options.workerId ?? defaultWorkerId();
    this.#log = resolveLogger(options.logger).child({ scope: 'launcher', worker_id: this.workerId });
  }

  /** Sandboxes running now. */
  get running(): number {
    return this.#children.size;
  }

  /**
   * Claim and launch until close() (or `signal`); resolves once every sandbox has exited. Rejects
   * with a RemoteApiError when the API refuses the key or environment for good.
   */
  run(signal?: AbortSignal): Promise<void> {
    this.#running ??= this.#loop(signal);
    return this.#running;
  }

  /** Stop claiming, send SIGTERM to every sandbox (their `handle` drains), wait for them to exit. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.emit('closing', {});
      this.#closeCtrl.abort(new Error('launcher closed'));
      this.#slotFreed?.();
      for (const { child } of this.#children.values()) this.#signalGroup(child, 'SIGTERM');
      const killTimer = setTimeout(() => {
        for (const { child } of this.#children.values()) {
          this.#log.warn({ pid: child.pid }, 'sandbox still running after the kill delay; sending SIGKILL');
          this.#signalGroup(child, 'SIGKILL');
        }
      }, this.#o.killAfterMs);
      try {
        await this.#running?.catch(() => undefined);
        await Promise.all([...this.#children.values()].map((c) => c.exited));
      } finally {
        clearTimeout(killTimer);
      }
    })();
    return this.#closing;
  }

  async #loop(signal: AbortSignal | undefined): Promise<void> {
    const unlink = linkAbort(signal, this.#closeCtrl);
    const poller = new Poller({
      client: scopedClient(this.#o.client, this.#o.environmentKey),
      environmentId: this.#o.environmentId,
      workerId: this.workerId,
      logger: this.#log,
      waitForSlot: (s) => this.#waitForSlot(s),
    });
    try {
      for await (const work of poller.claims(this.#closeCtrl.signal)) this.#launch(work);
    } finally {
      unlink();
      await Promise.all([...this.#children.values()].map((c) => c.exited));
    }
  }

  #waitForSlot(signal: AbortSignal): Promise<void> {
    if (this.#children.size < this.#o.concurrency || signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const onAbort = (): void => resolve();
      signal.addEventListener('abort', onAbort, { once: true });
      this.#slotFreed = () => {
        signal.removeEventListener('abort', onAbort);
        this.#slotFreed = undefined;
        resolve();
      };
    }).then(() => this.#waitForSlot(signal));
  }

  #launch(work: ClaimedWork): void {
    const sessionId = work.data.type === 'session' ? work.data.id : undefined;
    const log = this.#log.child({ workId: work.id, sessionId });
    if (sessionId === undefined) {
      log.info({ type: work.data.type }, 'acknowledged a non-session work item; no sandbox needed');
      return;
    }
    const env: NodeJS.ProcessEnv = {
      ...(this.#o.env ?? process.env),
      ANTHROPIC_WORK_ID: work.id,
      ANTHROPIC_ENVIRONMENT_ID: work.environmentId,
      ANTHROPIC_SESSION_ID: sessionId,
      ANTHROPIC_ENVIRONMENT_KEY: this.#o.environmentKey,
      ANTHROPIC_WORK_SECRET: work.secret ?? '',
      ANTHROPIC_BASE_URL: this.#o.client.baseURL,
    };
    const started = monotonicClock.now();
    const launchId = ++this.#launches;
    // Its own process group, so close() can signal the whole sandbox command, not just the shell.
    const child = spawn('/bin/sh', ['-c', this.#o.command], { env, stdio: ['ignore', this.#o.stdio, this.#o.stdio], detached: true });
    const exited = new Promise<void>((resolve) => {
      let done = false;
      const finish = (code: number | null, sig: NodeJS.Signals | null, err?: Error): void => {
        if (done) return;
        done = true;
        const exit: SandboxExit = { workId: work.id, sessionId, code, signal: sig, durationMs: monotonicClock.now() - started };
        if (err) log.error({ err }, 'sandbox command could not start; the item is reclaimed once its lease expires');
        else if (code === 0) log.info({ code, durationMs: exit.durationMs }, 'sandbox exited');
        else log.warn({ code, signal: sig, durationMs: exit.durationMs }, 'sandbox exited with a failure; the sandbox owns the item, the launcher does not stop it');
        this.#children.delete(launchId);
        this.emit('exited', exit);
        this.#slotFreed?.();
        resolve();
      };
      child.once('exit', (code, sig) => finish(code, sig));
      child.once('error', (e) => finish(null, null, coerceError(e)));
    });
    this.#children.set(launchId, { child, exited });
    log.info({ pid: child.pid }, 'sandbox launched');
    this.emit('launched', { workId: work.id, sessionId, pid: child.pid });
    if (this.#closeCtrl.signal.aborted) this.#signalGroup(child, 'SIGTERM');
  }

  #signalGroup(child: ChildProcess, sig: NodeJS.Signals): void {
    if (child.pid === undefined || child.exitCode !== null) return;
    try {
      process.kill(-child.pid, sig);
    } catch {
      try {
        child.kill(sig);
      } catch {
        // already gone
      }
    }
  }
}
