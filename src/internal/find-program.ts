import * as fs from 'node:fs';
import * as path from 'node:path';

/** True when `p` is a regular file this process may execute. */
export function isExecutable(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/** The first executable `name` on `PATH` (a usual default when it is unset), or undefined. */
export function findProgram(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  for (const dir of (env['PATH'] ?? '/usr/local/bin:/usr/bin:/bin').split(':')) {
    if (dir === '') continue;
    const p = path.join(dir, name);
    if (isExecutable(p)) return p;
  }
  return undefined;
}
