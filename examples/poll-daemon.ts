/**
 * Poll daemon: one long-running process that claims work items of a self-hosted environment and
 * serves their sessions on this machine, memory stores mounted at their mount paths and kept in sync.
 * The README shows this file below its comment, as is (a test keeps the two equal, type-checks the
 * file in a fresh ESM app and runs it against the emulator).
 *
 * Run:  npx tsx poll-daemon.ts   (an ESM app: "type": "module" in package.json, or name it .mts)
 *
 * Environment variables:
 *   ANTHROPIC_ENVIRONMENT_ID   the self-hosted environment (env_...)          required
 *   ANTHROPIC_ENVIRONMENT_KEY  its environment key                            required
 *   ANTHROPIC_BASE_URL         API base URL (default https://api.anthropic.com; the emulator's to try it)
 *   WORKDIR                    base folder of the sessions' tools (default: a fresh temp folder)
 *   METRICS_PORT               serve /healthz, /readyz, /metrics on this port (default: off)
 *   CONCURRENCY                sessions at once (default 1)
 *   LOG_LEVEL                  default info
 *
 * Security model: every session's tools (bash included) run as this process's user on this host,
 * with the workdir and the mounted store folders reachable. Run it in a container or VM you give
 * to the agent, as a non-root user; the mount parent (/mnt/memory in production) must exist and be
 * writable by that user. The environment key lets this process claim any session of the
 * environment, and the agents run as this process's user can read it: keep it in a secret store,
 * never in the image, and use the launcher (one container per session) when agents are untrusted.
 * Logs never contain the key or a work item's secret.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { createLogger, EnvironmentWorker, serveMetrics, type MetricsServer } from 'managed-agents-worker';

// Without a logger the library prints warnings only; info shows claims, mounts, syncs and ends.
const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'info' });
let metrics: MetricsServer | undefined;
try {
  const worker = new EnvironmentWorker({
    // The worker re-keys copies of this client with the environment key and each item's token.
    client: new Anthropic({ apiKey: null, authToken: process.env.ANTHROPIC_ENVIRONMENT_KEY ?? null }),
    environmentId: process.env.ANTHROPIC_ENVIRONMENT_ID, // unset: refused here, naming the variable
    environmentKey: process.env.ANTHROPIC_ENVIRONMENT_KEY,
    // Where the agent's tools run: a folder of its own, not the app's.
    workdir: process.env.WORKDIR ?? fs.mkdtempSync(path.join(os.tmpdir(), 'maw-work-')),
    concurrency: Number(process.env.CONCURRENCY ?? 1), // sessions at once; mount paths never collide
    memorySyncIntervalMs: 15_000,
    logger,
  });
  worker.on('sessionEnded', ({ sessionId, outcome }) => logger.info({ session_id: sessionId, status: outcome.status }, 'session ended'));

  // Optional: /healthz /readyz /metrics. Bound only once the options above were accepted.
  if (process.env.METRICS_PORT) metrics = await serveMetrics({ worker, port: Number(process.env.METRICS_PORT), logger });

  // The library installs no signal handler. SIGTERM/SIGINT: stop claiming, let running sessions
  // finish their final sync (bounded), stop their items, exit 0; a second signal exits at once.
  let stopping = false;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      if (stopping) process.exit(signal === 'SIGINT' ? 130 : 143);
      stopping = true;
      logger.info({ signal }, 'stopping: no new work; running sessions finish their final sync');
      void worker.close();
    });
  }
  await worker.run(); // resolves once every session has drained
  logger.info('poll daemon stopped');
} catch (err) {
  // A missing variable, a refused key (401): one line naming it, no stack trace.
  logger.fatal(`poll daemon stopped: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
} finally {
  await metrics?.close();
}
