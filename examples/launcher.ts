/**
 * Launcher: claims work items and starts one sandbox per item, passing the item in variables; the
 * sandbox runs `managed-agents-worker handle`, which serves exactly that item (heartbeats, memory,
 * stop). The README shows this file below its comment, as is (a test keeps the two equal,
 * type-checks it in a fresh ESM app and runs it: each item is served through `handle`).
 *
 * Run:  npx tsx launcher.ts   (an ESM app: "type": "module" in package.json, or name it .mts)
 *
 * Environment variables:
 *   ANTHROPIC_ENVIRONMENT_ID, ANTHROPIC_ENVIRONMENT_KEY   required
 *   ANTHROPIC_BASE_URL                                    optional (handed to each sandbox)
 *   LAUNCH_COMMAND    the sandbox command (default: `managed-agents-worker handle` as a plain process)
 *   LOG_LEVEL         default info
 *
 * Security model: the default command is a plain process under this user, which is no boundary (its
 * agent can read this process's environment). For untrusted agents start a container, a VM, a
 * Kubernetes Job (examples/sandbox-per-session/) or a process under another user; the command must
 * wait for the sandbox to end, since the launcher counts a slot free when the command exits.
 */
import Anthropic from '@anthropic-ai/sdk';
import { createLogger, Launcher } from 'managed-agents-worker';

const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'info' });
const environmentKey = process.env.ANTHROPIC_ENVIRONMENT_KEY;
try {
  const launcher = new Launcher({
    client: new Anthropic({ apiKey: null, authToken: environmentKey ?? null }),
    environmentId: process.env.ANTHROPIC_ENVIRONMENT_ID, // unset: refused here, naming the variable
    environmentKey,
    // Each item's variables (ANTHROPIC_WORK_ID, ANTHROPIC_SESSION_ID, ANTHROPIC_WORK_SECRET, ...)
    // reach the command's environment, never its command line. In production, a container or Job
    // per item: examples/sandbox-per-session/launch-container.sh (one host) or launch.sh (Kubernetes).
    command: process.env.LAUNCH_COMMAND ?? 'managed-agents-worker handle --workdir "$(mktemp -d)"',
    concurrency: 4, // sandboxes at once
    logger,
  });
  process.once('SIGTERM', () => void launcher.close()); // forwards SIGTERM to every sandbox, waits for them
  await launcher.run();
  logger.info('launcher stopped');
} catch (err) {
  logger.fatal(`launcher stopped: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
}
