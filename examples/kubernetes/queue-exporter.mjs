// Queue exporter: serves the environment's work queue depth on /metrics for an autoscaler (KEDA
// through Prometheus, see poll-daemon.yaml). It runs no sessions, so it stays up while the worker
// Deployment is scaled to zero, and scaling up from zero has a signal to read.
//
// Environment: ANTHROPIC_ENVIRONMENT_ID, ANTHROPIC_ENVIRONMENT_KEY (read once, then removed from
// the environment), ANTHROPIC_BASE_URL (optional), METRICS_PORT (default 9464), METRICS_HOST
// (default 0.0.0.0).
//
// Security model: it holds the environment key, which could claim the environment's work; it only
// reads the queue stats with it. Run it in its own pod, with no agent and no other workload.
import Anthropic from '@anthropic-ai/sdk';
import { serveMetrics } from 'managed-agents-worker';

function required(name) {
  const value = process.env[name];
  if (!value) {
    process.stderr.write(`queue-exporter: set ${name}\n`);
    process.exit(3);
  }
  return value;
}

const environmentId = required('ANTHROPIC_ENVIRONMENT_ID');
const environmentKey = required('ANTHROPIC_ENVIRONMENT_KEY');
delete process.env.ANTHROPIC_ENVIRONMENT_KEY;

const client = new Anthropic({ apiKey: null, authToken: environmentKey, baseURL: process.env.ANTHROPIC_BASE_URL || undefined });
const server = await serveMetrics({
  port: Number(process.env.METRICS_PORT ?? 9464),
  host: process.env.METRICS_HOST || '0.0.0.0',
  workQueue: { client, environmentId },
});
process.stdout.write(`queue-exporter: serving ${server.url}/metrics for ${environmentId}\n`);

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.once(signal, () => {
    void server.close().then(() => process.exit(0));
  });
}
