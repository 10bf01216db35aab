import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SandboxUnavailableError } from '../errors.js';
import { isPathInside } from './bwrap-args.js';

/**
 * What of this host every sandbox sees read-only, read once per process: the system folders (as
 * folders or, on a merged-`/usr` system, as the symlinks they are), a selection of `/etc`, the
 * Node runtime, and the code the tool host loads (its entry in this package's `dist/` and the
 * installed `@anthropic-ai/sdk`).
 */
export interface HostLayout {
  system: Array<{ path: string; symlinkTo?: string }>;
  /** `/etc` entries, the runtime and the packages: bound read-only at the same path. */
  readOnly: string[];
  /** The Node executable the host runs on (its real path). */
  node: string;
  /** The tool host's entry file. */
  hostEntry: string;
}

const SYSTEM_FOLDERS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * The `/etc` entries a shell and common tools need (users and groups by name, name resolution,
 * TLS roots, time zone, the dynamic linker's cache, Debian's alternatives). The rest of `/etc`
 * (host keys, `shadow`, service credentials) stays out.
 */
const ETC_ENTRIES = [
  'passwd',
  'group',
  'hosts',
  'hostname',
  'resolv.conf',
  'nsswitch.conf',
  'host.conf',
  'gai.conf',
  'services',
  'protocols',
  'localtime',
  'timezone',
  'ssl',
  'ca-certificates',
  'ca-certificates.conf',
  'pki',
  'alternatives',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'mime.types',
  'os-release',
  'inputrc',
  'bash.bashrc',
  'profile',
  'terminfo',
  'magic',
  'locale.alias',
];

const PACKAGE_NAME = 'managed-agents-worker';
const SDK_NAME = '@anthropic-ai/sdk';

let cached: HostLayout | undefined;

/** The host layout (read once, then cached); throws {@link SandboxUnavailableError} when the tool host cannot be found. */
export function hostLayout(): HostLayout {
  cached ??= readHostLayout();
  return cached;
}

function readHostLayout(): HostLayout {
  const system: HostLayout['system'] = [];
  for (const p of SYSTEM_FOLDERS) {
    const st = lstatOrUndefined(p);
    if (st?.isSymbolicLink()) system.push({ path: p, symlinkTo: fs.readlinkSync(p) });
    else if (st?.isDirectory()) system.push({ path: p });
  }
  const readOnly = ETC_ENTRIES.map((e) => `/etc/${e}`).filter((p) => fs.existsSync(p));
  const node = fs.realpathSync(process.execPath);
  const root = packageRoot();
  const hostEntry = path.join(root, 'dist', 'sandbox', 'tool-host.cjs');
  if (!fs.existsSync(hostEntry)) {
    throw new SandboxUnavailableError(
      'host_entry_missing',
      `the sandbox tool host ${hostEntry} is missing: this copy of ${PACKAGE_NAME} was not built. Run \`npm run build\` in ${root}, or set sandbox: 'none'`,
    );
  }
  const packages = packageClosure(sdkPackageRoot(hostEntry));
  const underSystem = (p: string): boolean => system.some((s) => s.symlinkTo === undefined && isPathInside(s.path, p));
  for (const p of [node, path.dirname(hostEntry), ...packages]) {
    if (!underSystem(p)) readOnly.push(p);
  }
  return { system, readOnly, node, hostEntry };
}

/** The folder of this package (the nearest `package.json` named `managed-agents-worker` above this module). */
function packageRoot(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const found = findPackage(here, PACKAGE_NAME);
  if (found === undefined) {
    throw new SandboxUnavailableError(
      'host_entry_missing',
      `cannot find the ${PACKAGE_NAME} package folder above ${here}; set sandbox: 'none'`,
    );
  }
  return found;
}

/** The installed SDK's folder, as the tool host will resolve it. */
function sdkPackageRoot(hostEntry: string): string {
  let main: string;
  try {
    main = createRequire(hostEntry).resolve(SDK_NAME);
  } catch (e) {
    throw new SandboxUnavailableError(
      'host_entry_missing',
      `the sandbox tool host cannot load ${SDK_NAME} from ${hostEntry}: install it beside ${PACKAGE_NAME}`,
      {
        cause: e,
      },
    );
  }
  const found = findPackage(path.dirname(main), SDK_NAME);
  if (found === undefined) throw new SandboxUnavailableError('host_entry_missing', `cannot find the folder of ${SDK_NAME} above ${main}`);
  return found;
}

/**
 * A package's folder and those of everything it depends on (runtime and optional dependencies, and
 * theirs), found the way Node looks them up: `node_modules/<name>` in the package's folder, then in
 * each folder above it. A dependency that is not installed is skipped (an optional one may be).
 */
function packageClosure(root: string): string[] {
  const found = new Set<string>([root]);
  const queue = [root];
  for (let dir = queue.shift(); dir !== undefined; dir = queue.shift()) {
    let manifest: { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> };
    try {
      manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as typeof manifest;
    } catch {
      continue;
    }
    for (const dep of Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies })) {
      const at = installedPackage(dir, dep);
      if (at !== undefined && !found.has(at)) {
        found.add(at);
        queue.push(at);
      }
    }
  }
  return [...found];
}

function installedPackage(from: string, name: string): string | undefined {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (fs.existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (path.dirname(dir) === dir) return undefined;
  }
}

function findPackage(from: string, name: string): string | undefined {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    try {
      if ((JSON.parse(fs.readFileSync(file, 'utf8')) as { name?: unknown }).name === name) return dir;
    } catch {
      // No package.json here, or not ours: keep going up.
    }
    if (path.dirname(dir) === dir) return undefined;
  }
}

function lstatOrUndefined(p: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(p);
  } catch {
    return undefined;
  }
}

/** Whether each hidden path is a folder or a file on the host; missing ones are left out. */
export function hideKinds(paths: readonly string[]): Array<{ path: string; kind: 'dir' | 'file' }> {
  const out: Array<{ path: string; kind: 'dir' | 'file' }> = [];
  for (const p of paths) {
    const st = lstatOrUndefined(p);
    if (st === undefined) continue;
    out.push({ path: p, kind: st.isDirectory() ? 'dir' : 'file' });
  }
  return out;
}
