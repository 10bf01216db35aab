/**
 * Webhook endpoint (plain node:http): the API posts `session.status_run_started` when a session
 * needs a worker; the handler verifies the signature, answers 202 at once, then claims the
 * environment's queued items in the background and serves each with `handleItem`, forwarding the
 * item's secret (so memory stores can be mounted).
 *
 * Run:  npx tsx examples/webhook-handler.ts   (in your project: import from 'managed-agents-worker')
 *
 * Environment variables:
 *   ANTHROPIC_WEBHOOK_SIGNING_KEY  the endpoint's signing secret (whsec_...)   required
 *   ANTHROPIC_ENVIRONMENT_ID       the self-hosted environment                 required
 *   ANTHROPIC_ENVIRONMENT_KEY      its environment key                         required
 *   ANTHROPIC_BASE_URL             API base URL (default https://api.anthropic.com)
 *   PORT                           port to listen on (default 8080; 0 picks a free one)
 *   WORKDIR                        base folder of the sessions' tools (default: current folder)
 *
 * Security model: deliveries with a bad or missing signature get 401 and start nothing; a body
 * over 1 MiB gets 413 and its connection is closed; a redelivered event is answered and ignored
 * once its drain reached the end of the queue. The delivery only says "there is work": the work
 * item and its secret come from the API (poll with the environment key), never from the request
 * body. Sessions run on this host with this process's user, as in the poll daemon: their agents
 * can read this process's environment key and webhook secret, so run it in a container or VM you
 * give to the agents. Terminate TLS in front of this server; expose only the webhook path.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import { createLogger, createWebhookHandler, EnvironmentWorker } from '../src/index.js';

const required = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required; export it before starting the webhook handler`);
  return v;
};
const environmentId = required('ANTHROPIC_ENVIRONMENT_ID');
const environmentKey = required('ANTHROPIC_ENVIRONMENT_KEY');
const logger = createLogger({ level: process.env['LOG_LEVEL'] ?? 'info' });
const client = new Anthropic({ apiKey: null, authToken: environmentKey });

// Constructed with the same options as a poll daemon (memorySyncIntervalMs applies here too).
const worker = new EnvironmentWorker({ client, environmentId, environmentKey, workdir: process.env['WORKDIR'] ?? process.cwd(), memorySyncIntervalMs: 15_000, logger });
const handler = createWebhookHandler({ worker, client, webhookSecret: required('ANTHROPIC_WEBHOOK_SIGNING_KEY'), environmentId, environmentKey, logger });

const server = http.createServer((req, res) => {
  if (req.url === '/webhook') handler(req, res);
  else res.writeHead(404).end();
});
server.listen(Number(process.env['PORT'] ?? 8080), () => {
  logger.info({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhook` }, 'webhook handler listening');
});

// Shutdown: new deliveries get 503 (the sender retries later); running sessions are ended now with
// their final sync and flush (bounded at 30 s), not waited for: a session may run for hours, and the
// orchestrator's SIGKILL would then land before any final sync.
process.once('SIGTERM', () => {
  void (async () => {
    await Promise.all([handler.close({ abortItems: true }), worker.close()]);
    server.close();
    logger.info('webhook handler stopped');
  })();
});
