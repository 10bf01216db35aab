// Pins the build to ASCII: V8 keeps each loaded module's source text for the life of the process,
// and a single character outside ASCII (an ellipsis or an arrow in a comment the bundler keeps)
// makes it hold a whole chunk as a two-byte string, twice its size (0.7 MB instead of 0.36 MB for
// the worker's chunk). Needs `npm run build` first (npm test does it).
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist');

async function builtScripts(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await builtScripts(full)));
    else if (/\.(c?js)$/.test(entry.name)) out.push(full);
  }
  return out;
}

describe('the build', () => {
  it('is ASCII only, so V8 holds each chunk as a one-byte string', async () => {
    const scripts = await builtScripts(DIST);
    expect(scripts.length).toBeGreaterThan(3);
    const offending: string[] = [];
    for (const file of scripts) {
      const lines = (await fs.readFile(file, 'utf8')).split('\n');
      lines.forEach((line, i) => {
        if (/[^\x00-\x7f]/.test(line)) offending.push(`${path.relative(DIST, file)}:${i + 1}: ${line.trim().slice(0, 120)}`);
      });
    }
    expect(offending).toEqual([]);
  });
});
