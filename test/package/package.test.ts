// Pins the built package as a user installs it: from a folder whose node_modules links to this
// repository, `managed-agents-worker` and `managed-agents-worker/testing` resolve through the
// package's `exports` both as ESM (`import`) and CommonJS (`require`), the library entry exposes
// the worker and the operator helpers, `startEmulator` starts a working emulator, and the `bin`
// runs. Needs `npm run build` first (npm test does it).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const PROBE = `
const lib = LOAD('managed-agents-worker');
const testing = LOAD('managed-agents-worker/testing');
const emu = await testing.startEmulator({ mountRoot: MOUNT });
const res = await fetch(emu.baseURL + '/v1/environments/' + emu.environmentId + '/work/poll', { headers: { authorization: 'Bearer ' + emu.environmentKey } });
await emu.close();
console.log(JSON.stringify({
  EnvironmentWorker: typeof lib.EnvironmentWorker,
  createWebhookHandler: typeof lib.createWebhookHandler,
  serveMetrics: typeof lib.serveMetrics,
  Launcher: typeof lib.Launcher,
  ConfigError: typeof lib.ConfigError,
  startEmulator: typeof testing.startEmulator,
  signWebhook: typeof testing.signWebhook,
  postWebhooksTo: typeof testing.postWebhooksTo,
  pollStatus: res.status,
}));
`;

describe('the built package', () => {
  let dir: string;
  beforeAll(async () => {
    if (!existsSync(path.join(REPO, 'dist/index.js'))) throw new Error('dist/ is missing: run `npm run build` before this test (npm test does)');
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-package-'));
    await fs.mkdir(path.join(dir, 'node_modules'));
    await fs.symlink(REPO, path.join(dir, 'node_modules', 'managed-agents-worker'), 'dir');
    await fs.writeFile(path.join(dir, 'package.json'), '{"name":"consumer","private":true}');
    await fs.writeFile(
      path.join(dir, 'esm.mjs'),
      `import * as L from 'managed-agents-worker';\nimport * as T from 'managed-agents-worker/testing';\nconst LOAD = (n) => (n.endsWith('/testing') ? T : L);\nconst MOUNT = ${JSON.stringify(dir)};\n${PROBE}`,
    );
    await fs.writeFile(
      path.join(dir, 'cjs.cjs'),
      `const LOAD = (n) => require(n);\nconst MOUNT = ${JSON.stringify(dir)};\n(async () => {\n${PROBE}\n})().catch((e) => { console.error(e); process.exit(1); });`,
    );
  });
  afterAll(async () => {
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  const expected = {
    EnvironmentWorker: 'function',
    createWebhookHandler: 'function',
    serveMetrics: 'function',
    Launcher: 'function',
    ConfigError: 'function',
    startEmulator: 'function',
    signWebhook: 'function',
    postWebhooksTo: 'function',
    pollStatus: 200,
  };

  it.each([
    { description: 'ESM import', file: 'esm.mjs' },
    { description: 'CommonJS require', file: 'cjs.cjs' },
  ])('resolves the library and the testing kit by $description', async ({ file }) => {
    const { stdout } = await run(process.execPath, [file], { cwd: dir });
    expect(JSON.parse(stdout)).toEqual(expected);
  });

  it('resolves each entry to the dist/ file its exports condition names', async () => {
    const { stdout } = await run(
      process.execPath,
      ['-e', "console.log(JSON.stringify([require.resolve('managed-agents-worker'), require.resolve('managed-agents-worker/testing')]))"],
      { cwd: dir },
    );
    const [main, testing] = JSON.parse(stdout) as [string, string];
    // Node resolves the link to its real path: this repository.
    expect(main).toBe(path.join(REPO, 'dist', 'index.cjs'));
    expect(testing).toBe(path.join(REPO, 'dist', 'testing', 'index.cjs'));
  });

  it('ships an executable bin that prints the help', async () => {
    const pkg = JSON.parse(await fs.readFile(path.join(REPO, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    const bin = path.join(REPO, pkg.bin['managed-agents-worker']!);
    expect((await fs.stat(bin)).mode & 0o111).not.toBe(0);
    expect((await fs.readFile(bin, 'utf8')).startsWith('#!/usr/bin/env node')).toBe(true);
    const { stdout } = await run(bin, ['--help']);
    expect(stdout).toContain('Usage: managed-agents-worker <command>');
  });
});
