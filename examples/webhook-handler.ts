/**
 * Webhook endpoint (plain node:http): the API posts `session.status_run_started` when a session
 * needs a worker; the handler verifies the signature, answers 202 at once, then claims the
 * environment's queued items in the background and serves each with `handleItem`, forwarding the
 * item's secret (so memory stores can be mounted). The README shows this file below its comment,
 * as is (a test keeps the two equal, type-checks it in a fresh ESM app and runs it).
 *
 * Run:  npx tsx webhook-handler.ts   (an ESM app: "type": "module" in package.json, or name it .mts)
 *
 * Environment variables:
 *   ANTHROPIC_WEBHOOK_SIGNING_KEY  the endpoint's signing secret (whsec_...)   required
 *   ANTHROPIC_ENVIRONMENT_ID       the self-hosted environment                 required
 *   ANTHROPIC_ENVIRONMENT_KEY      its environment key                         required
 *   ANTHROPIC_BASE_URL             API base URL (default https://api.anthropic.com)
 *   PORT                           port to listen on (default 8080; 0 picks a free one)
 *   WORKDIR                        base folder of the sessions' tools (default: a fresh temp folder)
 *   LOG_LEVEL                      default info
 *
 * Security model: deliveries with a bad or missing signature get 401 and start nothing; a body
 * over 1 MiB gets 413 and its connection is closed; a redelivered event is answered and ignored
 * once its drain reached the end of the queue. The delivery only says "there is work": the work
 * item and its secret come from the API (poll with the environment key), never from the request
 * body. Sessions run on this host with this process's user, as in the poll daemon: their agents
 * can read this process's environment key and webhook secret, so run it in a container or VM you
 * give to the agents. Terminate TLS in front of this server; expose only the webhook path.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { createLogger, createWebhookHandler, EnvironmentWorker } from 'managed-agents-worker';

const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'info' });
const environmentId = process.env.ANTHROPIC_ENVIRONMENT_ID;
const environmentKey = process.env.ANTHROPIC_ENVIRONMENT_KEY;
const client = new Anthropic({ apiKey: null, authToken: environmentKey ?? null });
const concurrency = 2; // items served at once: the handler runs them, the worker gives each its own folder

// Both refuse an unset variable at once, naming it, before the server listens.
const worker = new EnvironmentWorker({
  client,
  environmentId,
  environmentKey,
  concurrency,
  workdir: process.env.WORKDIR ?? fs.mkdtempSync(path.join(os.tmpdir(), 'maw-work-')),
  memorySyncIntervalMs: 15_000,
  logger,
});
const handler = createWebhookHandler({
  worker,
  client,
  environmentId,
  environmentKey,
  concurrency,
  webhookSecret: process.env.ANTHROPIC_WEBHOOK_SIGNING_KEY, // whsec_...
  logger,
});

// Or, in any framework: await handler.handle({ headers, body }) with the raw body.
const server = http.createServer((req, res) => {
  if (req.url === '/webhook') handler(req, res);
  else res.writeHead(404).end();
});
server.listen(Number(process.env.PORT ?? 8080), () => {
  logger.info({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhook` }, 'webhook handler listening');
});

// SIGTERM: new deliveries get 503 (the sender retries later); running sessions end now with their
// final sync and flush (at most 30 s), not waited for to the end: a session may run for hours, and
// the orchestrator's SIGKILL would land before any final sync. Then the server closes and the
// process exits.
process.once('SIGTERM', () => {
  logger.info('stopping: 503 for new deliveries; running sessions end with their final sync');
  void Promise.all([handler.close({ abortItems: true }), worker.close()]).then(() => {
    server.close();
    server.closeAllConnections();
    logger.info('webhook handler stopped');
  });
});
