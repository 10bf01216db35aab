/**
 * Poll daemon: one long-running process that claims work items of a self-hosted environment and
 * serves their sessions on this machine, memory stores mounted under /mnt/memory and kept in sync.
 *
 * Run:  npx tsx examples/poll-daemon.ts   (in your project: import from 'managed-agents-worker')
 *
 * Environment variables:
 *   ANTHROPIC_ENVIRONMENT_ID   the self-hosted environment (env_...)          required
 *   ANTHROPIC_ENVIRONMENT_KEY  its environment key                            required
 *   ANTHROPIC_BASE_URL         API base URL (default https://api.anthropic.com)
 *   WORKDIR                    base folder of the sessions' tools (default: current folder)
 *   METRICS_PORT               serve /healthz, /readyz, /metrics on this port (default: off)
 *   CONCURRENCY                sessions at once (default 1)
 *
 * Security model: every session's tools (bash included) run as this process's user on this host,
 * with the workdir and the mounted store folders reachable. Run it in a container or VM you give
 * to the agent, as a non-root user; /mnt/memory must exist and be writable by that user. The
 * environment key lets this process claim any session of the environment, and the agents run as
 * this process's user can read it: keep it in a secret store, never in the image, and use the
 * launcher (one container per session) when agents are untrusted. Logs never contain the key or a
 * work item's secret.
 */
import Anthropic from '@anthropic-ai/sdk';
import { createLogger, EnvironmentWorker, serveMetrics } from '../src/index.js';

const environmentKey = process.env['ANTHROPIC_ENVIRONMENT_KEY'];
const logger = createLogger({ level: process.env['LOG_LEVEL'] ?? 'info' });

const worker = new EnvironmentWorker({
  // The worker re-keys copies of this client with the environment key and each item's token.
  client: new Anthropic({ apiKey: null, authToken: environmentKey ?? null }),
  environmentId: process.env['ANTHROPIC_ENVIRONMENT_ID'],
  environmentKey,
  workdir: process.env['WORKDIR'] ?? process.cwd(),
  concurrency: Number(process.env['CONCURRENCY'] ?? 1),
  memorySyncIntervalMs: 15_000,
  logger,
});

worker.on('sessionEnded', ({ sessionId, outcome }) => logger.info({ session_id: sessionId, status: outcome.status }, 'session ended'));
worker.on('conflict', ({ storeId, path }) => logger.warn({ memory_store_id: storeId, path }, 'store version kept over a local edit'));

const metrics = process.env['METRICS_PORT'] ? await serveMetrics({ worker, port: Number(process.env['METRICS_PORT']), logger }) : undefined;

// The library installs no signal handler: SIGTERM → stop claiming, let sessions run their final
// sync (bounded), stop their items, then exit. A second signal exits at once.
let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(signal === 'SIGINT' ? 130 : 143);
    stopping = true;
    void worker.close();
  });
}

await worker.run();
await metrics?.close();
logger.info('poll daemon stopped');
