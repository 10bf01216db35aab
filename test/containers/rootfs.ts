/**
 * The container suite's root file system: a Debian bookworm `minbase` made with debootstrap from
 * the apt mirror this machine already uses (no image registry is needed), with bubblewrap in it,
 * this host's Node binary at `/usr/local/bin/node` and a user `agent` (uid and gid 10001, as
 * examples/kubernetes/poll-daemon.yaml runs the worker).
 *
 * Built once per include list and cached under `${MAW_CONTAINER_CACHE:-/var/tmp/maw-containers}`:
 * debootstrap writes into a temporary folder that is renamed into place only when the root is
 * complete, so a killed build never leaves a half root that looks finished. The containers run it
 * as `--rootfs DIR:O` (an overlay), so no run ever changes it.
 *
 * A row with a user namespace (`--uidmap 0:200000:65536`) gets a copy whose owners are shifted into
 * that range, as podman shifts an image's layer for `--uidmap`: podman 4.3 cannot id-map a
 * `--rootfs`, and runc, as the container's root, must create `/etc/hosts` and `/run/.containerenv`
 * in the root, which it cannot do in folders owned by an unmapped uid ("permission denied").
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';

export const SUITE = 'bookworm';
export const VARIANT = 'minbase';
export const INCLUDE: readonly string[] = ['bubblewrap', 'ca-certificates', 'procps'];
/** The user the Kubernetes manifests run the worker as. */
export const AGENT_UID = 10001;

/** Where the suite keeps its root file systems and podman's private storage. */
export function cacheDir(): string {
  return process.env['MAW_CONTAINER_CACHE'] || '/var/tmp/maw-containers';
}

/**
 * The Debian mirror of this machine's apt sources: the first `URIs:` line of
 * /etc/apt/sources.list.d/debian.sources (deb822), else the first `deb` line of
 * /etc/apt/sources.list. Security and update suites are skipped (debootstrap wants the main archive).
 */
export function aptMirror(): string {
  const deb822 = '/etc/apt/sources.list.d/debian.sources';
  if (fs.existsSync(deb822)) {
    for (const stanza of fs.readFileSync(deb822, 'utf8').split(/\n\s*\n/)) {
      const uris = /^URIs:\s*(\S+)/m.exec(stanza)?.[1];
      const suites = /^Suites:\s*(.+)$/m.exec(stanza)?.[1] ?? '';
      if (uris && suites.split(/\s+/).includes(SUITE)) return uris;
    }
  }
  const list = '/etc/apt/sources.list';
  if (fs.existsSync(list)) {
    for (const line of fs.readFileSync(list, 'utf8').split('\n')) {
      const m = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)/.exec(line.trim());
      if (m && m[2] === SUITE) return m[1]!;
    }
  }
  throw new Error(`no apt mirror for ${SUITE} in ${deb822} or ${list}; the container suite builds its root from it`);
}

export interface Rootfs {
  dir: string;
  /** Seconds debootstrap took in this run, or null when the cached root was used. */
  debootstrapSeconds: number | null;
}

/** Run a command, its output passed through (stdout dropped with `quiet`); rejects naming the command and its status. */
export function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; quiet?: boolean } = {}): Promise<void> {
  const { quiet, ...spawnOptions } = opts;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', quiet ? 'ignore' : 'inherit', 'inherit'], ...spawnOptions });
    child.once('error', reject);
    child.once('exit', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} exited with ${signal ?? code}`)),
    );
  });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Half roots of killed builds of `dir` (`<dir>.partial-<pid>`, that process gone). */
async function removeDeadPartials(dir: string): Promise<void> {
  const prefix = `${path.basename(dir)}.partial-`;
  for (const name of await fsp.readdir(path.dirname(dir))) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length));
    if (Number.isInteger(pid) && !isAlive(pid)) await fsp.rm(path.join(path.dirname(dir), name), { recursive: true, force: true });
  }
}

/** The cached root for the include list, built first when missing; this host's Node copied in every time it differs. */
export async function ensureRootfs(log: (line: string) => void = (l) => console.log(l)): Promise<Rootfs> {
  const key = createHash('sha256')
    .update(JSON.stringify({ suite: SUITE, variant: VARIANT, include: INCLUDE, agentUid: AGENT_UID }))
    .digest('hex')
    .slice(0, 12);
  const base = cacheDir();
  const dir = path.join(base, `${SUITE}-${key}`);
  await fsp.mkdir(base, { recursive: true });
  let debootstrapSeconds: number | null = null;
  if (!fs.existsSync(dir)) {
    await removeDeadPartials(dir);
    const partial = `${dir}.partial-${process.pid}`;
    await fsp.rm(partial, { recursive: true, force: true });
    const mirror = aptMirror();
    log(`rootfs: debootstrap --variant=${VARIANT} --include=${INCLUDE.join(',')} ${SUITE} ${partial} ${mirror}`);
    const started = process.hrtime.bigint();
    await run('debootstrap', [`--variant=${VARIANT}`, `--include=${INCLUDE.join(',')}`, SUITE, partial, mirror]);
    debootstrapSeconds = Number(process.hrtime.bigint() - started) / 1e9;
    log(`rootfs: debootstrap took ${debootstrapSeconds.toFixed(1)} s`);
    await fsp.appendFile(path.join(partial, 'etc/passwd'), `agent:x:${AGENT_UID}:${AGENT_UID}:agent:/home/agent:/bin/bash\n`);
    await fsp.appendFile(path.join(partial, 'etc/group'), `agent:x:${AGENT_UID}:\n`);
    await fsp.mkdir(path.join(partial, 'home/agent'), { recursive: true });
    await fsp.chown(path.join(partial, 'home/agent'), AGENT_UID, AGENT_UID);
    // apt's downloaded packages are not needed to run anything.
    await fsp.rm(path.join(partial, 'var/cache/apt/archives'), { recursive: true, force: true });
    // Another run of the suite may have built the same root meanwhile: the first one stays.
    await fsp.rename(partial, dir).catch(async (e: unknown) => {
      if (!fs.existsSync(dir)) throw e;
      await fsp.rm(partial, { recursive: true, force: true });
    });
  } else {
    log(`rootfs: cached ${dir}`);
  }
  await copyNode(dir);
  return { dir, debootstrapSeconds };
}

/**
 * A copy of `root` whose every owner is shifted by `offset` (uid and gid), for a container whose
 * user namespace maps its uid 0 to host uid `offset`. Cached next to `root`; made again when the
 * root's Node changed.
 */
export async function ensureShiftedRootfs(root: string, offset: number): Promise<string> {
  const dir = `${root}-uid${offset}`;
  const nodeOf = (d: string): Promise<fs.Stats | undefined> => fsp.stat(path.join(d, 'usr/local/bin/node')).catch(() => undefined);
  const [want, have] = await Promise.all([nodeOf(root), nodeOf(dir)]);
  if (have && want && have.size === want.size && have.mtimeMs === want.mtimeMs) return dir;
  await fsp.rm(dir, { recursive: true, force: true });
  await removeDeadPartials(dir);
  const partial = `${dir}.partial-${process.pid}`;
  await fsp.rm(partial, { recursive: true, force: true });
  await run('cp', ['-a', root, partial]);
  await shiftOwners(partial, offset);
  await fsp.rename(partial, dir);
  return dir;
}

async function shiftOwners(dir: string, offset: number): Promise<void> {
  const shift = async (p: string): Promise<void> => {
    const st = await fsp.lstat(p);
    await fsp.lchown(p, st.uid + offset, st.gid + offset);
    // A change of owner clears the set-user-id and set-group-id bits; put the mode back.
    if (!st.isSymbolicLink()) await fsp.chmod(p, st.mode & 0o7777);
    if (st.isDirectory()) for (const name of await fsp.readdir(p)) await shift(path.join(p, name));
  };
  await shift(dir);
}

/** This host's Node binary (glibc only, which bookworm has) as the root's /usr/local/bin/node. */
async function copyNode(dir: string): Promise<void> {
  const target = path.join(dir, 'usr/local/bin/node');
  const source = process.execPath;
  const [src, dst] = await Promise.all([fsp.stat(source), fsp.stat(target).catch(() => undefined)]);
  if (dst && dst.size === src.size && dst.mtimeMs === src.mtimeMs) return;
  await fsp.mkdir(path.dirname(target), { recursive: true });
  const tmp = `${target}.tmp-${process.pid}`;
  await fsp.copyFile(source, tmp);
  await fsp.chmod(tmp, 0o755);
  await fsp.utimes(tmp, src.atime, src.mtime);
  await fsp.rename(tmp, target);
}
