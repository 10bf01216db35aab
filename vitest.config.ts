import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/setup-state-dir.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Files share their test process (and its loaded modules): on two cores this saves about a
    // quarter of the run, spent loading the SDK and the emulator again for every file. A file
    // that changes process-wide state (environment variables, a forced scheme) restores it.
    isolate: false,
    reporters: ['default'],
  },
});
