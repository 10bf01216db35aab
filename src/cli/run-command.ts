import { RemoteApiError } from '../errors.js';
import { serveMetrics, type MetricsServer } from '../metrics/index.js';
import { EnvironmentWorker } from '../worker/environment-worker.js';
import type { Command } from './command.js';
import { cliLogger } from './cli-logger.js';
import { EXIT, EXIT_CODE_HELP } from './exit-codes.js';
import { intFlag, parseFlags } from './flags.js';
import { handleShutdownSignals } from './signals.js';
import { logLevelFlag, requireValue, WORKER_FLAGS, WORKER_FLAGS_HELP, workerOptionsFromFlags } from './worker-flags.js';

const HELP = `Usage: managed-agents-worker run [flags]

Poll daemon: claims work items of one self-hosted environment and serves their sessions, with
memory stores mounted as folders. SIGTERM or SIGINT: stop claiming, let running sessions finish
their final sync and flush (bounded), stop their items, exit 0. A second signal exits at once.

Flags:
  --concurrency <n>              sessions served at once, 1..64 (default 1)
  --metrics-port <port>          serve /healthz, /readyz and /metrics on this port (default: off)
  --metrics-host <host>          interface for the metrics port (default 0.0.0.0)
${WORKER_FLAGS_HELP}

${EXIT_CODE_HELP}`;

export const runCommand: Command = {
  name: 'run',
  summary: 'poll for work and serve sessions until SIGTERM (drains gracefully)',
  help: HELP,
  async run(argv, io) {
    const { values } = parseFlags('run', argv, {
      ...WORKER_FLAGS,
      concurrency: { type: 'string' },
      'metrics-port': { type: 'string' },
      'metrics-host': { type: 'string' },
    });
    if (values.help) {
      io.stdout(HELP + '\n');
      return EXIT.OK;
    }
    const concurrency = intFlag('concurrency', values.concurrency, 1, 64);
    const metricsPort = intFlag('metrics-port', values['metrics-port'], 0, 65_535);
    const logger = await cliLogger({ level: logLevelFlag(values, io.env), pretty: values.pretty ?? false, io });
    const options = workerOptionsFromFlags(values, io);
    // Checked here so the message names the flag and the variable, not the library's constructor.
    requireValue('environment-id', options.environmentId, 'ANTHROPIC_ENVIRONMENT_ID');
    requireValue('environment-key', options.environmentKey, 'ANTHROPIC_ENVIRONMENT_KEY');
    const worker = new EnvironmentWorker({ ...options, ...(concurrency ? { concurrency } : {}), logger });
    let metrics: MetricsServer | undefined;
    if (metricsPort !== undefined) {
      metrics = await serveMetrics({ worker, port: metricsPort, ...(values['metrics-host'] ? { host: values['metrics-host'] } : {}), logger });
      io.stderr(`metrics: ${metrics.url}/metrics\n`);
    }
    const removeSignals = handleShutdownSignals(
      (signal) => {
        logger.info({ signal }, 'shutting down: no new work; running sessions finish their final sync (send the signal again to exit at once)');
        void worker.close();
      },
      (code) => process.exit(code),
    );
    try {
      await worker.run();
      logger.info('worker stopped');
      return EXIT.OK;
    } catch (e) {
      if (e instanceof RemoteApiError && !e.retryable) {
        logger.fatal({ err: e, status: e.status }, 'the API refused this worker for good; check the environment id and key');
        await worker.close();
        return EXIT.FATAL_API;
      }
      throw e;
    } finally {
      removeSignals();
      await metrics?.close();
    }
  },
};
