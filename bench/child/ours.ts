/** Benchmark child: this library's EnvironmentWorker with the same options (plus its concurrency). */
import Anthropic from '@anthropic-ai/sdk';
import { EnvironmentWorker } from '../../src/index.js';
import { readConfig, serve } from './serve.js';

const config = readConfig();
const client = new Anthropic({ apiKey: 'sk-ant-api-bench', baseURL: config.baseURL, logLevel: 'off' });
const worker = new EnvironmentWorker({
  client,
  environmentId: config.environmentId,
  environmentKey: config.environmentKey,
  workdir: config.workdir,
  stateDir: config.stateDir,
  memorySyncIntervalMs: config.memorySyncIntervalMs,
  concurrency: config.concurrency,
  ...(config.sandbox !== undefined ? { sandbox: config.sandbox } : {}),
});
const readyAtMs: number[] = [];
worker.on('sessionStarted', () => readyAtMs.push(Date.now()));
serve(
  (signal) => worker.run(signal),
  () => ({ readyAtMs: [...readyAtMs] }),
);
