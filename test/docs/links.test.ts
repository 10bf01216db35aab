// Pins that the README and every page of docs/ hold together: the README stays within its bound
// (250 lines), links every docs page (or, for a page the package does not ship, names its path),
// and every relative link of the README and the docs pages names a file that exists, with an anchor
// that one of its headings renders as GitHub renders it (lower-case, spaces to `-`, punctuation
// dropped, `-1`, `-2` … for a repeated heading). Which links may appear in the package at all is
// pinned by test/package/readme-links.test.ts.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The README bound the issue sets: a page a reader takes in, the rest one link away. */
const README_MAX_LINES = 250;

/** README.md and the pages right in docs/ (docs/api/ is generated and checked on its own). */
const PAGES = [
  'README.md',
  ...fs
    .readdirSync(path.join(REPO, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

const read = (page: string): string => fs.readFileSync(path.join(REPO, page), 'utf8');

/** The text outside fenced code blocks (a link or heading inside one is code, not markdown). */
function prose(text: string): string {
  const out: string[] = [];
  let fence: string | undefined;
  for (const line of text.split('\n')) {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (m && (fence === undefined || m[1]!.startsWith(fence))) {
      fence = fence === undefined ? m[1] : undefined;
      out.push('');
      continue;
    }
    out.push(fence === undefined ? line : '');
  }
  return out.join('\n');
}

/** A heading's anchor as GitHub renders it (github-slugger: lower-case, punctuation dropped, spaces to `-`). */
function githubSlug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link: its text
    .replace(/<[^>]+>/g, '') // inline HTML tags
    .replace(/[*`]/g, '') // emphasis and code marks
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** Every anchor a page's headings give, repeated headings numbered as GitHub numbers them. */
function anchors(page: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(read(page)).split('\n')) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = githubSlug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Inline link targets outside code: `[text](target)`, inline code spans removed first. */
function links(page: string): Array<{ target: string; line: number }> {
  const found: Array<{ target: string; line: number }> = [];
  prose(read(page))
    .split('\n')
    .forEach((text, i) => {
      for (const m of text.replace(/`[^`]*`/g, '``').matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g))
        found.push({ target: m[1]!, line: i + 1 });
    });
  return found;
}

describe('the README', () => {
  it(`is at most ${README_MAX_LINES} lines`, () => {
    expect(read('README.md').trimEnd().split('\n').length).toBeLessThanOrEqual(README_MAX_LINES);
  });

  it('links every docs page it ships, and names the path of every other', () => {
    const manifest = JSON.parse(read('package.json')) as { files: string[] };
    const readme = read('README.md');
    const linked = new Set(links('README.md').map((l) => l.target.split('#')[0]));
    for (const page of PAGES.filter((p) => p !== 'README.md')) {
      if (manifest.files.includes(page)) expect(linked, `README links ${page}`).toContain(page);
      else expect(readme, `README names ${page}`).toContain(`\`${page}\``);
    }
  });
});

describe('the heading anchors', () => {
  it.each([
    { heading: '## Isolation: one sandbox per session', anchor: 'isolation-one-sandbox-per-session' },
    { heading: "#### The sandbox's network", anchor: 'the-sandboxs-network' },
    { heading: '### 3. One sandbox per session (launcher + `handle`)', anchor: '3-one-sandbox-per-session-launcher--handle' },
    { heading: '## `startEmulator(options?)`', anchor: 'startemulatoroptions' },
    { heading: '## Tracing (OpenTelemetry)', anchor: 'tracing-opentelemetry' },
    { heading: '## max_file_bytes and [a link](x.md)', anchor: 'max_file_bytes-and-a-link' },
  ])('$heading renders as #$anchor', ({ heading, anchor }) => {
    expect(githubSlug(heading.replace(/^#+\s+/, ''))).toBe(anchor);
  });
});

describe.each(PAGES)('%s', (page) => {
  it('has relative links that name an existing file, and anchors that one of its headings gives', () => {
    const broken: string[] = [];
    for (const { target, line } of links(page)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // an absolute URL
      const [file, anchor] = target.split('#') as [string, string | undefined];
      const resolved = file === '' ? page : path.posix.normalize(path.posix.join(path.posix.dirname(page), decodeURI(file)));
      if (resolved.startsWith('..') || !fs.existsSync(path.join(REPO, resolved))) {
        broken.push(`${page}:${line}: ${target}: no file ${resolved}`);
        continue;
      }
      if (anchor === undefined) continue;
      if (!resolved.endsWith('.md')) broken.push(`${page}:${line}: ${target}: an anchor into a file that is not markdown`);
      else if (!anchors(resolved).has(anchor)) broken.push(`${page}:${line}: ${target}: ${resolved} has no heading #${anchor}`);
    }
    expect(broken).toEqual([]);
  });
});
