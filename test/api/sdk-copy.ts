/**
 * A second copy of `@anthropic-ai/sdk`, as an app holds when it depends on another version than
 * ours or bundles the SDK: the files are copied into a temp folder, so every class in it (the
 * client, the error classes) is distinct from the one this repository imports. Its own dependencies
 * are linked to this repository's node_modules.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SDK_DIR = path.join(REPO, 'node_modules', '@anthropic-ai', 'sdk');

export interface SdkCopy {
  /** The temp folder holding `node_modules/@anthropic-ai/sdk`. */
  root: string;
  /** The copy's folder. */
  dir: string;
  remove(): Promise<void>;
}

/** Copy the SDK (its runtime files only) into `<temp>/node_modules/@anthropic-ai/sdk`. */
export async function copySdk(options: { version?: string } = {}): Promise<SdkCopy> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-sdk-copy-'));
  const dir = path.join(root, 'node_modules', '@anthropic-ai', 'sdk');
  await fs.cp(SDK_DIR, dir, {
    recursive: true,
    filter: (src) => !src.endsWith('.map') && path.relative(SDK_DIR, src).split(path.sep)[0] !== 'src',
  });
  const manifest = JSON.parse(await fs.readFile(path.join(dir, 'package.json'), 'utf8')) as {
    version: string;
    dependencies?: Record<string, string>;
  };
  if (options.version !== undefined) {
    manifest.version = options.version;
    await fs.writeFile(path.join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
  }
  for (const dep of Object.keys(manifest.dependencies ?? {})) {
    const target = path.join(REPO, 'node_modules', dep);
    const link = path.join(root, 'node_modules', dep);
    await fs.mkdir(path.dirname(link), { recursive: true });
    await fs.symlink(target, link, 'dir');
  }
  return { root, dir, remove: () => fs.rm(root, { recursive: true, force: true }) };
}

/** Load the copy as ESM (its `index.mjs`), as an app importing the SDK would. */
export async function importSdkCopy(copy: SdkCopy): Promise<typeof import('@anthropic-ai/sdk')> {
  const entry = createRequire(path.join(copy.root, 'index.js')).resolve('@anthropic-ai/sdk');
  const esm = entry.replace(/\.js$/, '.mjs');
  return (await import(pathToFileURL(esm).href)) as typeof import('@anthropic-ai/sdk');
}
