import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The container suite runs on its own: npm run test:containers (vitest.containers.config.ts).
    exclude: [...configDefaults.exclude, 'test/containers/**'],
    setupFiles: ['test/setup-state-dir.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Files share their test process (and its loaded modules): on two cores this saves about a
    // quarter of the run, spent loading the SDK and the emulator again for every file. A file
    // that changes process-wide state (environment variables, a forced scheme) restores it.
    isolate: false,
    // Two files at once, also on two cores (vitest's default there is one): most test time is spent
    // waiting on child processes, sockets and timers. Measured on this two-core VM: 560 s with one,
    // 357 s with two.
    maxWorkers: 2,
    minWorkers: 2,
    reporters: ['default'],
  },
});
