import { createRequire } from 'node:module';
import type { Agent } from 'undici';

/**
 * The part of undici the library uses, its `Agent`, loaded from its own module at first use:
 * undici's main entry installs an `Agent` as the process's global dispatcher when it loads, and the
 * library installs nothing global. `test/api/app-transport.int.test.ts` fails if this module moves.
 */
interface UndiciParts {
  Agent: typeof Agent;
}

let loaded: UndiciParts | undefined;

export function undiciParts(): UndiciParts {
  if (loaded === undefined) {
    // In the CommonJS build, `import.meta.url` is tsup's shim (see tsup.config.ts).
    const require = createRequire(import.meta.url);
    loaded = { Agent: require('undici/lib/dispatcher/agent.js') as typeof Agent };
  }
  return loaded;
}
