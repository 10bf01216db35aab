// Pins that the README and the manifest name no address the project does not have: the package is
// not published and has no public repository yet, so the README names repository files as paths
// (no link), a relative link names only a file the package ships, and the manifest carries no
// repository, home page or bugs address (only keywords).
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface Manifest {
  files: string[];
  keywords: string[];
  homepage?: unknown;
  repository?: unknown;
  bugs?: unknown;
}

async function load(): Promise<{ manifest: Manifest; readme: string; links: string[] }> {
  const manifest = JSON.parse(await fs.readFile(path.join(REPO, 'package.json'), 'utf8')) as Manifest;
  const readme = await fs.readFile(path.join(REPO, 'README.md'), 'utf8');
  // Inline links outside code blocks: [text](target).
  const prose = readme.replace(/```[\s\S]*?```/g, '');
  const links = [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
  return { manifest, readme, links };
}

describe('the README', () => {
  it("names no address of this project's own repository, in prose or in code", async () => {
    const { readme } = await load();
    expect(readme.match(/https?:\/\/[^\s)]*managed-agents-worker[^\s)]*/g) ?? []).toEqual([]);
  });

  it('uses relative link targets only for files the package ships', async () => {
    const { manifest, links } = await load();
    const relative = links.filter((l) => !/^[a-z]+:/.test(l) && !l.startsWith('#'));
    const shipped = (l: string): boolean => manifest.files.some((f) => l === f || l.startsWith(`${f}/`));
    expect(relative.filter((l) => !shipped(l))).toEqual([]);
  });
});

describe('the manifest', () => {
  it('names no repository, home page or bugs address, and carries keywords', async () => {
    const { manifest } = await load();
    expect(manifest.repository).toBeUndefined();
    expect(manifest.homepage).toBeUndefined();
    expect(manifest.bugs).toBeUndefined();
    expect(manifest.keywords.length).toBeGreaterThan(0);
  });
});
