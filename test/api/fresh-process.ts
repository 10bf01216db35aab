import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * Runs `script` (an ES module; it may import the TypeScript sources) in a fresh Node process, for
 * what only a process no other test touched can show: what importing loads, what the runtime
 * installs globally. The script must write nothing to stderr; what it writes to stdout is parsed as
 * JSON and returned.
 */
export function runInFreshProcess(script: string, env: NodeJS.ProcessEnv = process.env): unknown {
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
    env,
  });
  expect(run.stderr).toBe('');
  return JSON.parse(run.stdout) as unknown;
}
