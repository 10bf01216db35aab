/**
 * Bundles the three benchmark children (official, ours, floor) into plain ES modules under
 * `node_modules/.cache/maw-bench/`, so each child starts with `node` alone: no TypeScript loader in
 * the measured process, and ours loads the current source tree (not a stale `dist/`). Packages
 * stay external and resolve from this repository's `node_modules`. Split into chunks as the
 * package's own ESM build is, so what the library loads only on first use (`import()`: the session
 * code at the first work item) stays unloaded in the child until then, as it does for an operator.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'tsup';

export type ChildKind = 'official' | 'ours' | 'floor';

const here = path.dirname(fileURLToPath(import.meta.url));
export const CHILD_OUT_DIR = path.resolve(here, '..', 'node_modules', '.cache', 'maw-bench');

/**
 * Build the children; resolves with the path of each bundle. With `baseRef` (a git commit), the
 * "official" child is ours as of that commit instead (its `src/` with today's children), so one run
 * compares a change with what came before it.
 */
export async function buildChildren(opts: { baseRef?: string } = {}): Promise<Record<ChildKind, string>> {
  const base = opts.baseRef === undefined ? undefined : await buildBase(opts.baseRef);
  await build({
    ...CHILD_BUILD,
    entry: {
      ...(base === undefined ? { official: path.join(here, 'child', 'official.ts') } : {}),
      ours: path.join(here, 'child', 'ours.ts'),
      floor: path.join(here, 'child', 'floor.ts'),
    },
    outDir: CHILD_OUT_DIR,
    clean: true,
  });
  return {
    official: base ?? path.join(CHILD_OUT_DIR, 'official.mjs'),
    ours: path.join(CHILD_OUT_DIR, 'ours.mjs'),
    floor: path.join(CHILD_OUT_DIR, 'floor.mjs'),
  };
}

const CHILD_BUILD = {
  config: false,
  format: ['esm'],
  platform: 'node',
  target: 'node20',
  splitting: true,
  sourcemap: false,
  dts: false,
  silent: true,
  outExtension: () => ({ js: '.mjs' }),
} satisfies Parameters<typeof build>[0];

/**
 * `src/` of `ref` beside a copy of today's children, bundled as a package folder of its own: its
 * child under `out/`, its sandbox tool host under `dist/` and a `package.json` with the package's
 * name, so the base finds and starts its own tool host (the worker and the tool host speak a
 * protocol that changes between commits), not today's. Returns the path of the base child.
 */
async function buildBase(ref: string): Promise<string> {
  const repo = path.resolve(here, '..');
  const base = path.join(path.dirname(CHILD_OUT_DIR), 'maw-bench-base');
  fs.rmSync(base, { recursive: true, force: true });
  fs.mkdirSync(base, { recursive: true });
  const archive = execFileSync('git', ['archive', '--format=tar', ref, 'src', 'package.json'], {
    cwd: repo,
    maxBuffer: 64 * 1024 * 1024,
  });
  execFileSync('tar', ['-x', '-C', base], { input: archive });
  fs.cpSync(path.join(here, 'child'), path.join(base, 'bench', 'child'), { recursive: true });
  await build({
    ...CHILD_BUILD,
    entry: { official: path.join(base, 'bench', 'child', 'ours.ts') },
    outDir: path.join(base, 'out'),
    clean: true,
  });
  const toolHost = path.join(base, 'src', 'sandbox', 'tool-host.ts');
  if (fs.existsSync(toolHost)) {
    await build({
      config: false,
      entry: { 'sandbox/tool-host': toolHost },
      format: ['cjs'],
      platform: 'node',
      target: 'node20',
      sourcemap: false,
      dts: false,
      silent: true,
      outDir: path.join(base, 'dist'),
      clean: true,
    });
  }
  return path.join(base, 'out', 'official.mjs');
}
