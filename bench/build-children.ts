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
  const officialEntry = opts.baseRef === undefined ? path.join(here, 'child', 'official.ts') : checkoutBase(opts.baseRef);
  await build({
    config: false,
    entry: {
      official: officialEntry,
      ours: path.join(here, 'child', 'ours.ts'),
      floor: path.join(here, 'child', 'floor.ts'),
    },
    outDir: CHILD_OUT_DIR,
    format: ['esm'],
    platform: 'node',
    target: 'node20',
    splitting: true,
    sourcemap: false,
    dts: false,
    clean: true,
    silent: true,
    outExtension: () => ({ js: '.mjs' }),
  });
  return {
    official: path.join(CHILD_OUT_DIR, 'official.mjs'),
    ours: path.join(CHILD_OUT_DIR, 'ours.mjs'),
    floor: path.join(CHILD_OUT_DIR, 'floor.mjs'),
  };
}

/** `src/` of `ref` beside a copy of today's children; returns the path of that copy's `ours.ts`. */
function checkoutBase(ref: string): string {
  const repo = path.resolve(here, '..');
  const base = path.join(path.dirname(CHILD_OUT_DIR), 'maw-bench-base');
  fs.rmSync(base, { recursive: true, force: true });
  fs.mkdirSync(base, { recursive: true });
  const archive = execFileSync('git', ['archive', '--format=tar', ref, 'src'], { cwd: repo, maxBuffer: 64 * 1024 * 1024 });
  execFileSync('tar', ['-x', '-C', base], { input: archive });
  fs.cpSync(path.join(here, 'child'), path.join(base, 'bench', 'child'), { recursive: true });
  return path.join(base, 'bench', 'child', 'ours.ts');
}
