import { defineConfig, type Options } from 'tsup';

const shared: Options = {
  sourcemap: true,
  target: 'node20',
  platform: 'node',
  splitting: false,
  // p-limit ships ESM only; bundling it keeps the CommonJS build loadable with require(), and it
  // is therefore a build-time dependency only.
  noExternal: ['p-limit', 'yocto-queue'],
  // `import.meta.url` in the CommonJS build (prom-client is loaded lazily with createRequire).
  shims: true,
};

export default defineConfig([
  {
    ...shared,
    entry: { index: 'src/index.ts', 'testing/index': 'src/testing/index.ts' },
    format: ['esm', 'cjs'],
    dts: true,
    clean: true,
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
