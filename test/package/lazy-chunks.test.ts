// Pins what the library's entry loads before a session: the static imports of dist/index.js,
// followed through every chunk, reach neither the agent toolset, the SDK's session tool runner
// nor the memory core (MemoryMounter, SyncLoop); those load through import() at the first work
// item, so a worker waiting for work does not hold them. Needs `npm run build` first (npm test
// does it).
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist');

/** Every relative module a file imports statically (`import ... from "./x.js"`, `import "./x.js"`, `export ... from`). */
function staticImports(text: string): string[] {
  return [...text.matchAll(/^(?:import|export)\s(?:[^'"();]*?\sfrom\s)?["'](\.[^"']+)["'];?$/gm)].map((m) => m[1]!);
}

async function closure(entry: string): Promise<Map<string, string>> {
  const seen = new Map<string, string>();
  const todo = [entry];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (seen.has(file)) continue;
    const text = await fs.readFile(file, 'utf8');
    seen.set(file, text);
    for (const rel of staticImports(text)) todo.push(path.resolve(path.dirname(file), rel));
  }
  return seen;
}

const SESSION_ONLY: Array<{ what: string; pattern: RegExp }> = [
  { what: 'the agent toolset', pattern: /["']@anthropic-ai\/sdk\/tools\/agent-toolset\/node["']/ },
  { what: 'the session tool runner', pattern: /["']@anthropic-ai\/sdk\/lib\/tools\/SessionToolRunner["']/ },
  { what: 'the memory mounter', pattern: /\bMemoryMounter = class\b|\bclass MemoryMounter\b/ },
  { what: 'the sync loop', pattern: /\bSyncLoop = class\b|\bclass SyncLoop\b/ },
];

describe('the library entry', () => {
  it.each(SESSION_ONLY)('loads $what only through import(), at the first work item', async ({ pattern }) => {
    const entry = await closure(path.join(DIST, 'index.js'));
    expect(entry.size).toBeGreaterThan(1);
    const statically = [...entry].filter(([, text]) => pattern.test(text)).map(([file]) => path.relative(DIST, file));
    expect(statically).toEqual([]);
    // It is in the build, in a chunk the entry reaches by import().
    const all = (await fs.readdir(DIST)).filter((f) => f.endsWith('.js'));
    const holders: string[] = [];
    for (const f of all) if (pattern.test(await fs.readFile(path.join(DIST, f), 'utf8'))) holders.push(f);
    expect(holders.length).toBeGreaterThan(0);
    const dynamic = [...entry.values()].flatMap((text) => [...text.matchAll(/import\(["'](\.[^"']+)["']\)/g)].map((m) => m[1]!));
    expect(dynamic.length).toBeGreaterThan(0);
  });
});
