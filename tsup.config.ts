import { defineConfig, type Options } from 'tsup';

const shared: Options = {
  sourcemap: true,
  target: 'node20',
  platform: 'node',
  splitting: false,
  // p-limit ships ESM only; bundling it keeps the CommonJS build loadable with require(), and it
  // is therefore a build-time dependency only.
  noExternal: ['p-limit', 'yocto-queue'],
};

export default defineConfig([
  {
    ...shared,
    entry: { index: 'src/index.ts', 'testing/index': 'src/testing/index.ts' },
    format: ['esm', 'cjs'],
    dts: true,
    clean: true,
    // The CommonJS build finds the package folder (and the sandbox tool host in it) from import.meta.url.
    shims: true,
  },
  {
    // The sandbox tool host: started by the worker inside each session's sandbox, where only Node
    // and the SDK are visible, so it imports nothing else.
    ...shared,
    entry: { 'sandbox/tool-host': 'src/sandbox/tool-host.ts' },
    format: ['cjs'],
    dts: false,
    sourcemap: false,
    clean: false,
  },
  {
    // The executable: one ESM build, no type declarations (nothing imports it).
    ...shared,
    entry: { 'cli/main': 'src/cli/main.ts' },
    format: ['esm'],
    dts: false,
    sourcemap: false,
    clean: false,
  },
]);
