import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';

let loaded: typeof PromClient | undefined;

/**
 * prom-client, loaded at its first use: a worker that never exports metrics never loads it (about
 * 10 MiB of RSS at start otherwise). It is a CommonJS package, so it loads synchronously.
 */
export function promClient(): typeof PromClient {
  if (loaded === undefined) {
    // In the CommonJS build, `import.meta.url` is tsup's shim (see tsup.config.ts).
    const require = createRequire(import.meta.url);
    loaded = require('prom-client') as typeof PromClient;
  }
  return loaded;
}
