import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { InternalError } from '../errors.js';

const PACKAGE_NAME = 'managed-agents-worker';

/**
 * The version of this package, read at run time from its package.json: the nearest one above this
 * module named `managed-agents-worker` (the same walk finds it from the sources and from the build).
 */
export function packageVersion(moduleUrl: string = import.meta.url): string {
  let dir = path.dirname(fileURLToPath(moduleUrl));
  for (;;) {
    const version = versionIn(path.join(dir, 'package.json'));
    if (version !== undefined) return version;
    const parent = path.dirname(dir);
    if (parent === dir) throw new InternalError(`no package.json named ${PACKAGE_NAME} above ${fileURLToPath(moduleUrl)}`);
    dir = parent;
  }
}

function versionIn(file: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  const pkg = JSON.parse(text) as { name?: unknown; version?: unknown };
  return pkg.name === PACKAGE_NAME && typeof pkg.version === 'string' ? pkg.version : undefined;
}
