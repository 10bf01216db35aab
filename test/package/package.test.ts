// Pins the package as a user installs it from the registry: `npm pack` ships the build, the README and the docs pages it links,
// the licence, the manifest and the container profiles only (one ESM CLI build, no declaration file
// for it), no source maps, at most 430 kB packed, the CLI importing the library's chunks rather than a copy of them; the manifest
// depends on exactly the packages the bundle loads; installed into a fresh app whose
// @anthropic-ai/sdk is another 1.x version, it adds no second SDK copy and no pino-pretty; both
// entries load with ESM `import` and CommonJS `require`; a client made with the app's SDK
// type-checks in the worker's options; the bin prints its version, says how to get pino-pretty
// for --pretty, and exits 4 when the API refuses the environment key.
// Needs `npm run build` first (npm test does it); installs from the npm cache when it can.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import { builtinModules } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator } from '../../src/testing/index.js';
import { copySdk } from '../api/sdk-copy.js';

const exec = promisify(execFile);
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
/** A version outside `~1.14.0`, as an app on a newer SDK has. */
const APP_SDK_VERSION = '1.15.0';

interface Manifest {
  version: string;
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  bin: Record<string, string>;
}

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

const TYPE_CHECK = `
import Anthropic from '@anthropic-ai/sdk';
import { EnvironmentWorker, type EnvironmentWorkerOptions } from 'managed-agents-worker';
const client = new Anthropic({ apiKey: 'sk-ant-api-x' });
const options: EnvironmentWorkerOptions = { client, environmentId: 'env_1', environmentKey: 'key' };
export const worker = new EnvironmentWorker(options);
`;

let manifest: Manifest;
let tmp: string;
let app: string;
let packed: { filename: string; files: Array<{ path: string }>; size: number; unpackedSize: number };
const bin = (): string => path.join(app, 'node_modules', '.bin', 'managed-agents-worker');

beforeAll(async () => {
  if (!existsSync(path.join(REPO, 'dist/index.js')))
    throw new Error('dist/ is missing: run `npm run build` before this test (npm test does)');
  manifest = JSON.parse(await fs.readFile(path.join(REPO, 'package.json'), 'utf8')) as Manifest;
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-package-'));
  // The build is fresh (npm test builds first), so skip prepack's second build.
  const { stdout } = await exec(NPM, ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], { cwd: REPO });
  packed = (JSON.parse(stdout) as Array<typeof packed>)[0]!;

  // The app's own SDK: a copy of ours under another version number, packed like a registry tarball.
  const sdk = await copySdk({ version: APP_SDK_VERSION });
  try {
    await exec(NPM, ['pack', '--ignore-scripts', '--pack-destination', tmp], { cwd: sdk.dir });
  } finally {
    await sdk.remove();
  }
  app = path.join(tmp, 'app');
  await fs.mkdir(app);
  await fs.writeFile(
    path.join(app, 'package.json'),
    JSON.stringify({
      name: 'app',
      private: true,
      dependencies: {
        '@anthropic-ai/sdk': `file:../anthropic-ai-sdk-${APP_SDK_VERSION}.tgz`,
        'managed-agents-worker': `file:../${packed.filename}`,
      },
    }),
  );
  await exec(NPM, ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error'], { cwd: app });
}, 300_000);

afterAll(async () => {
  if (tmp) await fs.rm(tmp, { recursive: true, force: true });
});

describe('the packed tarball', () => {
  it('ships the build, the README and the docs pages it links, the licence, the manifest and the container profiles only', () => {
    const lib = (base: string): string[] => ['js', 'cjs', 'd.ts', 'd.cts'].map((ext) => `dist/${base}.${ext}`);
    const expected = [
      'LICENSE',
      'README.md',
      // The docs pages the README links (the others stay in the repository: the size bound below).
      'docs/operating.md',
      'docs/options.md',
      'docs/running.md',
      'docs/security.md',
      'package.json',
      'dist/cli/main.js',
      'dist/sandbox/tool-host.cjs',
      // What an operator installs on a container host or a node so that a sandbox starts there.
      'profiles/seccomp-bubblewrap.json',
      'profiles/apparmor-bubblewrap',
      ...lib('index'),
      ...lib('testing/index'),
    ];
    const files = packed.files.map((f) => f.path);
    // Besides the entries: the ESM build's shared chunks (the library code the CLI imports too).
    const chunks = files.filter((f) => /^dist\/[\w-]+\.js$/.test(f) && f !== 'dist/index.js');
    expect(chunks.length).toBeGreaterThan(0);
    expect(files.filter((f) => !chunks.includes(f)).sort()).toEqual(expected.sort());
  });

  it('stays small: no source maps or embedded sources (either would double it), at most 430 kB packed', () => {
    expect(packed.files.filter((f) => f.path.endsWith('.map'))).toEqual([]);
    expect(packed.size).toBeLessThanOrEqual(430_000);
    console.log(
      `tarball: ${(packed.size / 1000).toFixed(1)} kB packed, ${(packed.unpackedSize / 1000).toFixed(1)} kB unpacked, ${packed.files.length} files`,
    );
  });

  it('has the CLI import the library build instead of bundling a second copy of it', async () => {
    const dist = path.join(REPO, 'dist');
    const cli = await fs.readFile(path.join(dist, 'cli', 'main.js'), 'utf8');
    const index = await fs.readFile(path.join(dist, 'index.js'), 'utf8');
    // The worker class is defined once, in a chunk both the library entry and the CLI import.
    const definesWorker = (text: string): boolean => /\bEnvironmentWorker ?= ?class\b|\bclass EnvironmentWorker\b/.test(text);
    expect(definesWorker(cli)).toBe(false);
    const chunksOf = (text: string): string[] => [...text.matchAll(/from ?"\.\.?\/(chunk-[\w-]+\.js)"/g)].map((m) => m[1]!);
    const shared = chunksOf(cli).filter((c) => chunksOf(index).includes(c));
    const defining = [];
    for (const c of shared) if (definesWorker(await fs.readFile(path.join(dist, c), 'utf8'))) defining.push(c);
    expect(defining).toHaveLength(1);
  });

  it('builds before packing, so a pack from a fresh clone ships the build', () => {
    expect(manifest.scripts['prepack']).toBe('npm run build');
  });

  it('depends on exactly the packages the bundle loads, and on the SDK as a peer', async () => {
    const loaded = new Set<string>();
    const dist = path.join(app, 'node_modules', 'managed-agents-worker', 'dist');
    const builtins = new Set(builtinModules);
    for (const file of await fs.readdir(dist, { recursive: true })) {
      if (!/\.(c?js)$/.test(file)) continue;
      const text = await fs.readFile(path.join(dist, file), 'utf8');
      // `require2(`: the bundler renames a local `require`; `createRequire)(importMetaUrl)(`: the
      // syntax minifier calls the made `require` in place (prom-client is loaded lazily through one).
      const call = /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\d*\s*\(\s*|createRequire\)?\s*\([\w.$]*\)\s*\(\s*)["']([^"'./][^"']*)["']/g;
      for (const m of text.matchAll(call)) {
        const spec = m[1]!;
        if (!/^(@[a-z0-9][\w.-]*\/)?[a-z0-9][\w.-]*(\/[\w./-]*)?$/.test(spec)) continue; // not a module name (text in a template)
        if (spec.startsWith('node:') || builtins.has(spec)) continue;
        loaded.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
      }
    }
    const optionalPeers = Object.keys(manifest.peerDependenciesMeta ?? {}).filter((n) => manifest.peerDependenciesMeta?.[n]?.optional);
    const required = [
      ...Object.keys(manifest.dependencies),
      ...Object.keys(manifest.peerDependencies).filter((n) => !optionalPeers.includes(n)),
    ];
    expect([...loaded].sort()).toEqual(required.sort());
    expect(Object.keys(manifest.peerDependencies)).toContain('@anthropic-ai/sdk');
    expect(optionalPeers).toEqual(['pino-pretty']);
  });
});

describe('installed into an app on another SDK version', () => {
  it("uses the app's SDK and adds neither a second copy nor pino-pretty", async () => {
    const appSdk = JSON.parse(await fs.readFile(path.join(app, 'node_modules/@anthropic-ai/sdk/package.json'), 'utf8')) as {
      version: string;
    };
    expect(appSdk.version).toBe(APP_SDK_VERSION);
    expect(existsSync(path.join(app, 'node_modules/managed-agents-worker/node_modules/@anthropic-ai/sdk'))).toBe(false);
    expect(existsSync(path.join(app, 'node_modules/pino-pretty'))).toBe(false);
    expect(existsSync(path.join(app, 'node_modules/p-limit'))).toBe(false);
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
    {
      description: 'ESM import',
      file: 'esm.mjs',
      wrap: (probe: string) =>
        `import * as L from 'managed-agents-worker';\nimport * as T from 'managed-agents-worker/testing';\nconst LOAD = (n) => (n.endsWith('/testing') ? T : L);\n${probe}`,
    },
    {
      description: 'CommonJS require',
      file: 'cjs.cjs',
      wrap: (probe: string) =>
        `const LOAD = (n) => require(n);\n(async () => {\n${probe}\n})().catch((e) => { console.error(e); process.exit(1); });`,
    },
  ])('loads the library and the testing kit with $description', async ({ file, wrap }) => {
    await fs.writeFile(path.join(app, file), wrap(`const MOUNT = ${JSON.stringify(tmp)};\n${PROBE}`));
    const { stdout } = await exec(process.execPath, [file], { cwd: app });
    expect(JSON.parse(stdout)).toEqual(expected);
  });

  it("type-checks a client made with the app's SDK in the worker's options (ESM and CommonJS)", async () => {
    await fs.writeFile(path.join(app, 'check.mts'), TYPE_CHECK);
    await fs.writeFile(path.join(app, 'check.cts'), TYPE_CHECK);
    const tsconfig = {
      compilerOptions: {
        strict: true,
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        noEmit: true,
        // The SDK's own declarations are large; the assignment under test is in our files.
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [path.join(REPO, 'node_modules/@types')],
      },
      files: ['check.mts', 'check.cts'],
    };
    await fs.writeFile(path.join(app, 'tsconfig.json'), JSON.stringify(tsconfig));
    const tsc = path.join(REPO, 'node_modules/typescript/bin/tsc');
    const result = await exec(process.execPath, [tsc, '-p', app], { cwd: app }).then(
      () => '',
      (e: { stdout?: string }) => e.stdout ?? String(e),
    );
    expect(result).toBe('');
  }, 120_000);
});

describe('the installed bin', () => {
  const cleanEnv = { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir() };

  it('prints the package version', async () => {
    const { stdout } = await exec(bin(), ['--version'], { cwd: app, env: cleanEnv });
    expect(stdout.trim()).toBe(manifest.version);
  });

  it('says how to install pino-pretty when --pretty is asked for without it', async () => {
    const err = await exec(bin(), ['run', '--pretty'], { cwd: app, env: cleanEnv }).then(
      () => undefined,
      (e: { stderr: string }) => e.stderr,
    );
    expect(err).toContain('npm install pino-pretty');
  });

  it('exits 4 when the API refuses the environment key on poll', async () => {
    const emu = await startEmulator({ mountRoot: tmp, latencyMs: 0 });
    try {
      const env = {
        ...cleanEnv,
        ANTHROPIC_BASE_URL: emu.baseURL,
        ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
        ANTHROPIC_ENVIRONMENT_KEY: 'not-a-real-key',
      };
      const code = await exec(bin(), ['run', '--memory-sync-interval', 'off'], { cwd: app, env, timeout: 60_000 }).then(
        () => 0,
        (e: { code?: number }) => e.code,
      );
      expect(code).toBe(4);
    } finally {
      await emu.close();
    }
  }, 90_000);
});
