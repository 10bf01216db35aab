import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import type Anthropic from '@anthropic-ai/sdk';
import { coerceError } from '../errors.js';
import { linkAbort } from '../internal/abort.js';
import { monotonicClock } from '../internal/clock.js';
import { resolveLogger, type Logger } from '../internal/logger.js';
import { defaultWorkerId, Poller, workQueueApi, type ClaimedWork } from '../worker/poller.js';
import { scopedClient } from '../worker/scoped-client.js';
import { stopUnservedWork } from '../worker/stop-work.js';
import { resolveLauncherOptions, type LauncherOptions, type ResolvedLauncherOptions } from './options.js';
import { sandboxEnv } from './sandbox-env.js';

/** How one sandbox command ended, as the `exited` event reports it. */
export interface SandboxExit {
  /** The work item the sandbox served. */
  workId: string;
  /** The session the item runs (only session items get a sandbox). */
  sessionId: string | undefined;
  /** The command's exit code, or null when a signal ended it. */
  code: number | null;
  /** The signal that ended the command, or null when it exited by itself. */
  signal: NodeJS.Signals | null;
  /** Milliseconds from the command's start to its exit. */
  durationMs: number;
}

/** Events of {@link Launcher}. Each carries one payload object, so fields can be added later. */
export interface LauncherEventMap {
  /** A sandbox command was started for a work item. */
  launched: [
    {
      /** The work item's id. */
      workId: string;
      /** The session the item runs (only session items get a sandbox). */
      sessionId: string | undefined;
      /** The process id of the command's shell, or undefined when it could not be started. */
      pid: number | undefined;
      /** True when the item had no usable secret, so its sandbox got the environment key. */
      environmentKeyPassed: boolean;
    },
  ];
  /** A sandbox command exited; its concurrency slot is free again. */
  exited: [SandboxExit];
  /** `close()` was called (or the signal of `run()` aborted): no more claims, running sandboxes get SIGTERM. */
  closing: [{}];
}

/**
 * One sandbox per work item: claims items with the environment key and starts `command` for each.
 *
 * Least privilege: a sandbox command gets only what its one item needs — `ANTHROPIC_WORK_ID`,
 * `ANTHROPIC_ENVIRONMENT_ID`, `ANTHROPIC_SESSION_ID`, `ANTHROPIC_BASE_URL` and the item's
 * `ANTHROPIC_WORK_SECRET` (whose sessions token is scoped to that session and its stores) — plus
 * the allow-listed variables of `SANDBOX_BASE_ENV_VARS` and those named in `passEnv`, never the
 * launcher's whole environment. `ANTHROPIC_ENVIRONMENT_KEY` goes in only for an item whose secret
 * yields no sessions token, and never on a command line.
 *
 * Contract: the sandbox owns the item. Its `handle` process heartbeats the lease, runs the session,
 * syncs memory and stops the item; the launcher never heartbeats or stops a session's item itself,
 * so a launch command that returns early cannot get its session stopped. An item that is not a
 * session (a healthcheck) gets no sandbox and is stopped at once. An item counts as finished
 * (its concurrency slot is freed) when the launch command exits, so make the command wait for
 * the sandbox (`docker run` without `-d`; `kubectl create job …` followed by `kubectl wait`).
 */
export class Launcher extends EventEmitter<LauncherEventMap> {
  /** This launcher's id, sent as `Anthropic-Worker-ID` on polls: the `workerId` option, else `<host name>-<uuid>`. */
  readonly workerId: string;
  readonly #o: ResolvedLauncherOptions;
  /** Polls, acks and the stop of items nobody serves go through this copy keyed with the environment key. */
  readonly #envClient: Anthropic;
  readonly #log: Logger;
  /**
   * Running sandbox commands, keyed per launch: the API may hand the same item out again (its lease
   * lapsed while a slow sandbox was starting), and each of its sandboxes must be counted, signalled
   * and waited for.
   */
  readonly #children = new Map<number, { child: ChildProcess; exited: Promise<void> }>();
  #launches = 0;
  /** Stops of items nobody serves still in flight; run() waits for them before it resolves. */
  readonly #stops = new Set<Promise<boolean>>();
  readonly #closeCtrl = new AbortController();
  #slotFreed: (() => void) | undefined;
  #closing: Promise<void> | undefined;
  #running: Promise<void> | undefined;

  /** Validates `options` (every problem in one ConfigError; unknown keys refused). */
  constructor(options: LauncherOptions) {
    super();
    this.#o = resolveLauncherOptions(options);
    this.#envClient = scopedClient(this.#o.client, this.#o.environmentKey);
    this.workerId = this.#o.workerId ?? defaultWorkerId();
    this.#log = resolveLogger(this.#o.logger).child({ component: 'launcher', worker_id: this.workerId });
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
          this.#log.warn({ sandbox_pid: child.pid }, 'sandbox still running after the kill delay; sending SIGKILL');
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
      api: workQueueApi(this.#envClient),
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
      await Promise.all([...this.#stops]);
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
    const log = this.#log.child({ work_id: work.id, session_id: sessionId });
    if (sessionId === undefined) {
      log.info({ type: work.data.type }, 'acknowledged a work item that is not a session; stopping it, no sandbox needed');
      const stop = stopUnservedWork(this.#envClient, { workId: work.id, environmentId: work.environmentId }, log).finally(() =>
        this.#stops.delete(stop),
      );
      this.#stops.add(stop);
      return;
    }
    const { env, environmentKeyPassed } = sandboxEnv({
      source: this.#o.env,
      passEnv: this.#o.passEnv,
      item: { workId: work.id, environmentId: work.environmentId, sessionId, secret: work.secret },
      environmentKey: this.#o.environmentKey,
      baseURL: this.#o.client.baseURL,
    });
    if (environmentKeyPassed) {
      log.warn('work item carries no usable secret; its sandbox gets the environment key (ANTHROPIC_ENVIRONMENT_KEY) to serve it');
    }
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
        else if (code === 0) log.info({ code, duration_ms: exit.durationMs }, 'sandbox exited');
        else
          log.warn(
            { code, signal: sig, duration_ms: exit.durationMs },
            'sandbox exited with a failure; the sandbox owns the item, the launcher does not stop it',
          );
        this.#children.delete(launchId);
        this.emit('exited', exit);
        this.#slotFreed?.();
        resolve();
      };
      child.once('exit', (code, sig) => finish(code, sig));
      child.once('error', (e) => finish(null, null, coerceError(e)));
    });
    this.#children.set(launchId, { child, exited });
    log.info({ sandbox_pid: child.pid, environment_key_passed: environmentKeyPassed }, 'sandbox launched');
    this.emit('launched', { workId: work.id, sessionId, pid: child.pid, environmentKeyPassed });
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
