// `npm run test:containers`: the worker in real containers (podman with runc), test/containers only.
// Needs root, podman, runc, debootstrap, uidmap and iproute2; builds its root file system (cached) and
// installs the packed package once per run (test/containers/global-setup.ts), then runs the files,
// each file's rows two at a time (MAW_CONTAINER_ROWS).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/containers/**/*.test.ts'],
    // The root file system and the installed app, once for every file.
    globalSetup: ['test/containers/global-setup.ts'],
    testTimeout: 300_000,
    // The first run's debootstrap and every run's npm pack and install.
    hookTimeout: 900_000,
    pool: 'forks',
    maxConcurrency: Number(process.env['MAW_CONTAINER_ROWS'] || 2),
    reporters: ['default'],
  },
});
