import { createRequire } from 'node:module';
import type { Agent, Dispatcher } from 'undici';

/**
 * The two parts of undici the page transport uses, loaded from their own modules at first use:
 * undici's main entry installs an `Agent` as the process's global dispatcher when it loads, and the
 * library installs nothing global. `test/api/app-transport.int.test.ts` fails if these modules move.
 */
interface UndiciParts {
  /** undici's `request()`, called with the dispatcher as `this` (any object with `dispatch`). */
  request: (this: Dispatcher, opts: Dispatcher.RequestOptions) => Promise<Dispatcher.ResponseData>;
  Agent: typeof Agent;
}

let loaded: UndiciParts | undefined;

export function undiciParts(): UndiciParts {
  if (loaded === undefined) {
    // In the CommonJS build, `import.meta.url` is tsup's shim (see tsup.config.ts).
    const require = createRequire(import.meta.url);
    loaded = {
      request: require('undici/lib/api/api-request.js') as UndiciParts['request'],
      Agent: require('undici/lib/dispatcher/agent.js') as typeof Agent,
    };
  }
  return loaded;
}
