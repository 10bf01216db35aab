/**
 * Custom tools with a per-session factory: `tools` is a function called once per session with
 * that session's tool context, so each session gets its own instances (here: an audit log in the
 * session's workdir and a read-only order lookup) next to the standard agent toolset.
 *
 * Run:  npx tsx examples/custom-tools.ts   (in your project: import from 'managed-agents-worker')
 *
 * Environment variables:
 *   ANTHROPIC_ENVIRONMENT_ID, ANTHROPIC_ENVIRONMENT_KEY   required
 *   ANTHROPIC_BASE_URL                                    optional
 *   WORKDIR                                               base folder (default: current folder)
 *
 * Security model: a custom tool runs in this process with its full rights; validate every input
 * as untrusted (the agent chose it) and keep tools narrow. Tools receive `ctx.allowedRoots` (the
 * session's memory folders) but nothing forces a custom tool to stay inside them: resolve paths
 * yourself. Writes a custom tool makes into a read-only store folder are not synced back.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { betaTool } from '@anthropic-ai/sdk/helpers/beta/json-schema';
import { betaAgentToolset20260401, type AgentToolContext } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import { createLogger, EnvironmentWorker } from 'managed-agents-worker';

const ORDERS: Record<string, string> = { 'A-100': 'shipped 2026-03-02', 'A-101': 'awaiting payment' };

/** Called once per session: fresh tools bound to that session's context. */
function sessionTools(ctx: AgentToolContext) {
  const auditLog = path.join(ctx.workdir, 'tool-audit.log');
  let calls = 0;
  const lookupOrder = betaTool({
    name: 'lookup_order',
    description: 'Look up the status of an order by its id (e.g. A-100).',
    inputSchema: {
      type: 'object',
      properties: { order_id: { type: 'string', pattern: '^[A-Z]-\\d{3}$' } },
      required: ['order_id'],
      additionalProperties: false,
    },
    run: async ({ order_id }) => {
      calls += 1;
      await fs.appendFile(auditLog, `${new Date().toISOString()} lookup_order ${order_id} (call ${calls} of this session)\n`);
      const status = ORDERS[order_id];
      return status ? `order ${order_id}: ${status}` : `no order ${order_id}`;
    },
  });
  return [...betaAgentToolset20260401(ctx), lookupOrder];
}

const environmentKey = process.env['ANTHROPIC_ENVIRONMENT_KEY'];
const worker = new EnvironmentWorker({
  client: new Anthropic({ apiKey: null, authToken: environmentKey ?? null }),
  environmentId: process.env['ANTHROPIC_ENVIRONMENT_ID'],
  environmentKey,
  workdir: process.env['WORKDIR'] ?? process.cwd(),
  tools: sessionTools,
  logger: createLogger({ level: process.env['LOG_LEVEL'] ?? 'info' }),
});

process.once('SIGTERM', () => void worker.close());
await worker.run();
