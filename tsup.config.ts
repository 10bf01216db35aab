import { defineConfig, type Options } from 'tsup';

const shared: Options = {
  // No source maps: with the sources embedded they were 2 MB of the tarball, and even without them
  // 80 kB of it.
  sourcemap: false,
  // Whitespace and syntax only, never identifiers (names stay as written), so a stack trace into
  // dist/ still names its functions; the package ships every module twice (ESM and CommonJS), and
  // unminified that was a tenth of the tarball.
  minifyWhitespace: true,
  minifySyntax: true,
  target: 'node20',
  platform: 'node',
  // p-limit ships ESM only; bundling it keeps the CommonJS build loadable with require(), and it
  // is therefore a build-time dependency only.
  noExternal: ['p-limit', 'yocto-queue'],
  // `import.meta.url` in the CommonJS build (prom-client is loaded lazily with createRequire).
  shims: true,
};

export default defineConfig([
  {
    // ESM: the library, the testing kit and the executable in one build with shared chunks, so
    // dist/cli/main.js imports the library's own code instead of carrying a second copy of it.
    ...shared,
    entry: { index: 'src/index.ts', 'testing/index': 'src/testing/index.ts', 'cli/main': 'src/cli/main.ts' },
    format: ['esm'],
    splitting: true,
    dts: { entry: { index: 'src/index.ts', 'testing/index': 'src/testing/index.ts' } },
    clean: true,
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
    // CommonJS, for require(): the library and the testing kit (no chunks in this format).
    ...shared,
    entry: { index: 'src/index.ts', 'testing/index': 'src/testing/index.ts' },
    format: ['cjs'],
    dts: { entry: { index: 'src/index.ts', 'testing/index': 'src/testing/index.ts' } },
    clean: false,
    // The package folder (and the sandbox tool host in it) is found from import.meta.url.
    shims: true,
  },
]);
