import * as path from 'node:path';
import { ConfigError } from '../errors.js';
import { stateDirOverlap } from './state-dir-outside.js';

/**
 * A hidden path (`hidePaths`, the CLI's credential files) is hidden by mounting over it in each
 * sandbox. Right in a folder the agent writes to (the workdir, a read-write path), that holds: the
 * agent cannot rename, remove or link a mount point. Deeper down it does not: the agent renames
 * the folder above it (`mv secrets s2`), and the next session served in that folder (with
 * `concurrency` 1, another tenant's) finds the file unmasked at `s2/<name>`. Such a path is
 * refused with a {@link ConfigError} naming it and the fix.
 */
export function assertHiddenPathsSafe(hidePaths: readonly string[], writable: readonly string[]): void {
  for (const hidden of hidePaths) {
    for (const folder of writable) {
      if (stateDirOverlap(hidden, folder) !== 'state-inside') continue; // the hidden path is inside the folder
      if (path.resolve(path.dirname(hidden)) === path.resolve(folder)) continue;
      const how = `the hidden path ${hidden} lies in a sub-folder of ${folder}, which the agent writes to`;
      throw new ConfigError(
        `${how}: the sandbox hides it by mounting over it, but the agent can rename the folder above it, and the next ` +
          `session served there sees the file. Move ${hidden} out of ${folder} (keep credential files outside the workdir), ` +
          'or give the worker another workdir (--workdir).',
        [`sandbox: ${how}`],
      );
    }
  }
}
