// Pins that the README, the docs pages the package ships and the manifest name no address the
// project does not have: the package is not published and has no public repository yet, so these
// pages name repository files as paths (no link), a relative link in them names only a file the
// package ships (the installed copy has no other), and the manifest carries no repository, home
// page or bugs address (only keywords). No docs page names an address of the project's repository
// either. Which docs pages ship is a size choice (the tarball's bound is pinned in package.test.ts):
// test/docs/links.test.ts checks that the README links each shipped page and names the path of
// every other.
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

const manifest = async (): Promise<Manifest> => JSON.parse(await fs.readFile(path.join(REPO, 'package.json'), 'utf8')) as Manifest;
const shippedPages = async (): Promise<string[]> => ['README.md', ...(await manifest()).files.filter((f) => /^docs\/.*\.md$/.test(f))];
const allPages = async (): Promise<string[]> => [
  'README.md',
  ...(await fs.readdir(path.join(REPO, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`),
];

/** Inline link targets outside code blocks and code spans: [text](target). */
function links(text: string): string[] {
  const prose = text.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '``');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

describe('the README and the docs pages', () => {
  it("name no address of this project's own repository, in prose or in code", async () => {
    for (const page of await allPages()) {
      const text = await fs.readFile(path.join(REPO, page), 'utf8');
      expect(text.match(/https?:\/\/[^\s)]*managed-agents-worker[^\s)]*/g) ?? [], page).toEqual([]);
    }
  });

  it('that ship use relative link targets only for files the package ships', async () => {
    const { files } = await manifest();
    const shipped = (file: string): boolean => files.some((f) => file === f || file.startsWith(`${f}/`));
    const pages = await shippedPages();
    expect(pages.length).toBeGreaterThan(1);
    for (const page of pages) {
      const text = await fs.readFile(path.join(REPO, page), 'utf8');
      const relative = links(text)
        .filter((l) => !/^[a-z]+:/.test(l) && !l.startsWith('#'))
        .map((l) => path.posix.normalize(path.posix.join(path.posix.dirname(page), l.split('#')[0]!)));
      expect(
        relative.filter((f) => !shipped(f)),
        `${page} links files the package does not ship`,
      ).toEqual([]);
    }
  });
});

describe('the manifest', () => {
  it('names no repository, home page or bugs address, and carries keywords', async () => {
    const m = await manifest();
    expect(m.repository).toBeUndefined();
    expect(m.homepage).toBeUndefined();
    expect(m.bugs).toBeUndefined();
    expect(m.keywords.length).toBeGreaterThan(0);
  });
});
