/** Benchmark child: the official SDK EnvironmentWorker, as an operator would run it. */
import Anthropic from '@anthropic-ai/sdk';
import { EnvironmentWorker } from '@anthropic-ai/sdk/lib/environments/worker';
import { readConfig, serve } from './serve.js';

const config = readConfig();
const client = new Anthropic({ apiKey: 'sk-ant-api-bench', baseURL: config.baseURL, logLevel: 'off' });
const worker = new EnvironmentWorker({
  client,
  environmentId: config.environmentId,
  environmentKey: config.environmentKey,
  workdir: config.workdir,
  memorySyncIntervalMs: config.memorySyncIntervalMs,
});
serve((signal) => worker.run(signal));
