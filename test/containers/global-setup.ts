/**
 * What every file of the container suite runs on, made once per run before any file starts: the
 * cached root file system and the app installed from the package's `npm pack` tarball (both
 * fixtures copied in). Files read them with `inject('containerRootfs')` / `inject('containerApp')`.
 * Containers and network namespaces of earlier runs whose test process is gone are removed first.
 * The app folder is removed at the end of the run unless `MAW_CONTAINER_KEEP` is set (its path is
 * printed then).
 */
import * as fsp from 'node:fs/promises';
import type { TestProject } from 'vitest/node';
import { appParent, buildApp, type App } from './app.js';
import { LAUNCHER_NETNS_PREFIX, removeStaleNamespaces } from './netns.js';
import { removeStaleContainers } from './podman.js';
import { ensureRootfs, type Rootfs } from './rootfs.js';

declare module 'vitest' {
  export interface ProvidedContext {
    containerRootfs: Rootfs;
    containerApp: App;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (process.getuid?.() !== 0) throw new Error('the container suite runs podman, debootstrap and ip netns as root (rootful podman)');
  await removeStaleContainers();
  await removeStaleNamespaces(LAUNCHER_NETNS_PREFIX);
  const parent = await appParent();
  const [rootfs, app] = await Promise.all([ensureRootfs(), buildApp(parent)]);
  project.provide('containerRootfs', rootfs);
  project.provide('containerApp', app);
  return async () => {
    if (process.env['MAW_CONTAINER_KEEP']) console.log(`containers: app kept in ${app.dir}`);
    else await fsp.rm(parent, { recursive: true, force: true });
  };
}
