import { Option } from 'commander';
import { WORKER_DEFAULTS } from '../internal/defaults.js';
import { serveMetrics, type MetricsServer } from '../metrics/index.js';
import { EnvironmentWorker } from '../worker/environment-worker.js';
import { logError, logRefusedForGood, reportError } from './cli.js';
import { cliLogger } from './cli-logger.js';
import type { Command } from './command.js';
import { COMMON_EXIT_ROWS, EXIT } from './exit-codes.js';
import { environmentInputs, intArg, requireInputs } from './flags.js';
import { handleShutdownSignals } from './signals.js';
import { addWorkerFlags, WORKER_ENVIRONMENT, workerOptionsFromFlags } from './worker-flags.js';

export const runCommand: Command = {
  name: 'run',
  summary: 'poll for work and serve sessions until SIGTERM (drains gracefully)',
  description: `Poll daemon: claims work items of one self-hosted environment and serves their sessions, with
memory stores mounted as folders. SIGTERM or SIGINT: stop claiming, let running sessions finish
their final sync and flush (bounded), stop their items, exit 0. A second signal exits at once.`,
  environment: WORKER_ENVIRONMENT,
  exitCodes: [
    [EXIT.OK, 'stopped by SIGTERM/SIGINT after the drain'],
    COMMON_EXIT_ROWS.unexpected,
    COMMON_EXIT_ROWS.usage,
    COMMON_EXIT_ROWS.config,
    COMMON_EXIT_ROWS.fatalApi,
    COMMON_EXIT_ROWS.secondSignal,
    COMMON_EXIT_ROWS.secondTerm,
  ],
  flags(cmd) {
    cmd
      .addOption(
        new Option(
          '--concurrency <n>',
          `sessions served at once, 1..${WORKER_DEFAULTS.concurrencyMax} (default ${WORKER_DEFAULTS.concurrency})`,
        ).argParser(intArg(1, WORKER_DEFAULTS.concurrencyMax)),
      )
      .addOption(
        new Option('--metrics-port <port>', 'serve /healthz, /readyz and /metrics on this port (default: off)').argParser(
          intArg(0, 65_535),
        ),
      )
      .option('--metrics-host <host>', 'interface for the metrics port (default 0.0.0.0)');
    addWorkerFlags(cmd);
  },
  async run(flags, io) {
    // Once the command starts, every line on stderr comes from the logger; a configuration it
    // refuses before starting is reported as plain text.
    const logger = await cliLogger(flags, io);
    const concurrency = flags['concurrency'] as number | undefined;
    const metricsPort = flags['metricsPort'] as number | undefined;
    const metricsHost = flags['metricsHost'] as string | undefined;
    let worker: EnvironmentWorker;
    try {
      const options = workerOptionsFromFlags(flags, io);
      requireInputs('run', environmentInputs(options.environmentId, options.environmentKey));
      worker = new EnvironmentWorker({ ...options, ...(concurrency !== undefined ? { concurrency } : {}), logger });
    } catch (e) {
      // Refused before anything started: plain text, as a usage error is, not a log line.
      return reportError(e, io);
    }
    let metrics: MetricsServer | undefined;
    const removeSignals = handleShutdownSignals(
      (signal) => {
        logger.info(
          { signal },
          'shutting down: no new work; running sessions finish their final sync (send the signal again to exit at once)',
        );
        void worker.close();
      },
      (code) => process.exit(code),
    );
    try {
      if (metricsPort !== undefined) {
        metrics = await serveMetrics({ worker, port: metricsPort, ...(metricsHost ? { host: metricsHost } : {}), logger });
        logger.info({ url: `${metrics.url}/metrics` }, 'serving metrics');
      }
      await worker.run();
      logger.info('worker stopped');
      return EXIT.OK;
    } catch (e) {
      await worker.close();
      return logRefusedForGood(e, logger, 'this worker') ?? logError(e, logger);
    } finally {
      removeSignals();
      await metrics?.close();
    }
  },
};
