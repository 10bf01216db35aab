/**
 * The app the containers run, installed the way a user installs the package: `npm pack` of the
 * package folder (its `prepack` builds `dist/`), then a fresh `npm init -y` folder with that
 * tarball and `@anthropic-ai/sdk` (the version the package folder has installed) added by
 * `npm install`, plus the fixtures' scripts. The containers bind it read-only at /opt/app.
 *
 * `MAW_CONTAINER_PACKAGE_DIR` chooses the package folder (default: this checkout), e.g. a
 * `git worktree` of an older commit with its own `npm ci`.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { run } from './rootfs.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
/** The scripts the containers (and the launcher test's API side) run, copied into the app. */
const FIXTURES = ['scenario.mjs', 'launcher-sessions.mjs'].map((name) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url)));

export function packageDir(): string {
  return path.resolve(process.env['MAW_CONTAINER_PACKAGE_DIR'] || REPO);
}

function installedSdkVersion(dir: string): string {
  for (const root of [dir, REPO]) {
    const file = path.join(root, 'node_modules/@anthropic-ai/sdk/package.json');
    if (fs.existsSync(file)) return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
  }
  throw new Error(`no @anthropic-ai/sdk installed in ${dir}/node_modules (run npm ci there)`);
}

export interface App {
  /** The folder the containers mount at /opt/app. */
  dir: string;
  packageDir: string;
  tarball: string;
  sdkVersion: string;
  seconds: number;
}

/** Pack the package folder and install it with the SDK in a fresh app folder under `parent`. */
export async function buildApp(parent: string, log: (line: string) => void = (l) => console.log(l)): Promise<App> {
  const started = process.hrtime.bigint();
  const pkg = packageDir();
  const sdkVersion = installedSdkVersion(pkg);
  const packs = await fsp.mkdtemp(path.join(parent, 'pack-'));
  log(`app: npm pack in ${pkg}`);
  await run('npm', ['pack', '--silent', '--pack-destination', packs], { cwd: pkg, quiet: true });
  const tarballs = (await fsp.readdir(packs)).filter((f) => f.endsWith('.tgz'));
  if (tarballs.length !== 1) throw new Error(`npm pack left ${tarballs.length} tarballs in ${packs}`);
  const tarball = path.join(packs, tarballs[0]!);
  const dir = await fsp.mkdtemp(path.join(parent, 'app-'));
  await run('npm', ['init', '-y'], { cwd: dir, quiet: true });
  log(`app: npm install ${path.basename(tarball)} @anthropic-ai/sdk@${sdkVersion}`);
  await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', tarball, `@anthropic-ai/sdk@${sdkVersion}`], { cwd: dir });
  for (const file of FIXTURES) await fsp.copyFile(file, path.join(dir, path.basename(file)));
  // Readable by every uid a row runs as (the bind is read-only anyway).
  await fsp.chmod(dir, 0o755);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  log(`app: ready in ${dir} (${seconds.toFixed(1)} s)`);
  return { dir, packageDir: pkg, tarball, sdkVersion, seconds };
}

/** A temp folder for the app, readable by the containers' users. */
export async function appParent(): Promise<string> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-containers-'));
  await fsp.chmod(dir, 0o755);
  return dir;
}
