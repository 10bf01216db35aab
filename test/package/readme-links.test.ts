// Pins that the README's links work where users read it, on the registry page too: a link into
// the repository is absolute (the repository named in package.json, branch main) and names a file
// or folder that exists here; a relative link names only a file the package ships; and the
// manifest carries repository, homepage, bugs and keywords.
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface Manifest {
  files: string[];
  homepage: string;
  keywords: string[];
  repository: { type: string; url: string };
  bugs: { url: string };
}

async function load(): Promise<{ manifest: Manifest; links: string[] }> {
  const manifest = JSON.parse(await fs.readFile(path.join(REPO, 'package.json'), 'utf8')) as Manifest;
  const readme = await fs.readFile(path.join(REPO, 'README.md'), 'utf8');
  // Inline links outside code blocks: [text](target).
  const prose = readme.replace(/```[\s\S]*?```/g, '');
  const links = [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
  return { manifest, links };
}

describe('the README links', () => {
  it('point into the repository named in package.json by absolute URLs to files that exist', async () => {
    const { manifest, links } = await load();
    const base = manifest.repository.url.replace(/^git\+/, '').replace(/\.git$/, '');
    const repoLinks = links.filter((l) => l.startsWith(base));
    expect(repoLinks.length).toBeGreaterThan(0);
    const missing = repoLinks
      .map((l) => /^\/(?:blob|tree)\/main\/(.+)$/.exec(l.slice(base.length))?.[1])
      .filter((p) => p === undefined || !existsSync(path.join(REPO, p.replace(/#.*$/, ''))));
    expect(missing).toEqual([]);
  });

  it('use relative targets only for files the package ships', async () => {
    const { manifest, links } = await load();
    const relative = links.filter((l) => !/^[a-z]+:/.test(l) && !l.startsWith('#'));
    const shipped = (l: string): boolean => manifest.files.some((f) => l === f || l.startsWith(`${f}/`));
    expect(relative.filter((l) => !shipped(l))).toEqual([]);
  });
});

describe('the manifest', () => {
  it('names the repository, the home page, where to file bugs, and keywords', async () => {
    const { manifest } = await load();
    expect(manifest.repository.type).toBe('git');
    expect(manifest.repository.url).toMatch(/^git\+https:\/\/github\.com\/[\w-]+\/[\w.-]+\.git$/);
    const base = manifest.repository.url.replace(/^git\+/, '').replace(/\.git$/, '');
    expect(manifest.homepage.startsWith(base)).toBe(true);
    expect(manifest.bugs.url).toBe(`${base}/issues`);
    expect(manifest.keywords.length).toBeGreaterThan(0);
  });
});
