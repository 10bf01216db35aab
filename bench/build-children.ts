/**
 * Bundles the three benchmark children (official, ours, floor) into plain ES modules under
 * `node_modules/.cache/maw-bench/`, so each child starts with `node` alone: no TypeScript loader in
 * the measured process, and ours loads the current source tree (not a stale `dist/`). Packages
 * stay external and resolve from this repository's `node_modules`.
 */
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'tsup';

export type ChildKind = 'official' | 'ours' | 'floor';

const here = path.dirname(fileURLToPath(import.meta.url));
export const CHILD_OUT_DIR = path.resolve(here, '..', 'node_modules', '.cache', 'maw-bench');

/** Build the children; resolves with the path of each bundle. */
export async function buildChildren(): Promise<Record<ChildKind, string>> {
  await build({
    config: false,
    entry: {
      official: path.join(here, 'child', 'official.ts'),
      ours: path.join(here, 'child', 'ours.ts'),
      floor: path.join(here, 'child', 'floor.ts'),
    },
    outDir: CHILD_OUT_DIR,
    format: ['esm'],
    platform: 'node',
    target: 'node20',
    splitting: false,
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
