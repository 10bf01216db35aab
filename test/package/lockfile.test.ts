// Pins the installed tool chain: the lock file resolves esbuild (used by tsup, tsx and vite) to a
// single version, so one esbuild binary installs, and resolves no second @anthropic-ai/sdk.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

async function versionsOf(name: string): Promise<string[]> {
  const lock = JSON.parse(await fs.readFile(path.join(REPO, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string }>;
  };
  const versions = Object.entries(lock.packages)
    .filter(([key]) => key === `node_modules/${name}` || key.endsWith(`/node_modules/${name}`))
    .map(([, entry]) => entry.version ?? '?');
  return [...new Set(versions)];
}

describe('package-lock.json', () => {
  it.each([
    { description: 'esbuild', name: 'esbuild' },
    { description: 'the SDK', name: '@anthropic-ai/sdk' },
  ])('holds one version of $description', async ({ name }) => {
    expect(await versionsOf(name)).toHaveLength(1);
  });
});
