import { defineConfig } from 'tsup';

export default defineConfig({
  entry: {
    index: 'src/index.ts',
    'testing/index': 'src/testing/index.ts',
    'cli/main': 'src/cli/main.ts',
  },
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node20',
  platform: 'node',
  splitting: false,
  // p-limit ships ESM only; bundling it keeps the CommonJS build loadable with require().
  noExternal: ['p-limit', 'yocto-queue'],
});
