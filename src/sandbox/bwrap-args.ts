/**
 * What one session's sandbox sees, and the bubblewrap command line that builds it. Pure: the host
 * layout (which system folders exist, where the runtime lives) is read elsewhere and passed in.
 *
 * The sandbox starts from an empty root (bubblewrap's tmpfs) and only what is listed here is put
 * in it, each at the same path as outside (but for a session's own copy of a store, bound at the
 * store's mount path), so the tools see the paths the agent is told:
 *
 * | what                                  | how                       |
 * |---------------------------------------|---------------------------|
 * | system folders, selected `/etc` files | read-only                 |
 * | the Node runtime, the tool host code  | read-only                 |
 * | the session's workdir                 | read-write                |
 * | each of its stores at `mount_path`    | read-write, or read-only for a read-only store; from the session's own host folder when it has one |
 * | `/tmp`, `/dev/shm`                    | private, empty, each sized (`tmpBytes`) |
 * | `/dev`, `/proc`                       | minimal devices, read-only; its own processes only |
 * | the operator's extra paths            | as asked                  |
 * | hidden paths inside any of the above  | an empty folder, or `/dev/null` for a file |
 *
 * Everything else (other sessions' folders, the rest of the mount parent, the state folder, home
 * folders, the worker's environment) is absent. The processes get their own PID, IPC, UTS and
 * cgroup namespaces, no capabilities (so nothing can remount a read-only folder), a new terminal
 * session, and die with the worker. They always get a user namespace of their own (a root worker's
 * too), in which bubblewrap refuses nested ones where it can (`--disable-userns`); the seccomp
 * filter (`seccomp/filter.ts`) is handed over by whoever spawns bubblewrap, as a descriptor.
 */
export interface SandboxView {
  /** System folders, read-only; an entry with `symlinkTo` is recreated as that symlink (merged `/usr`). */
  system: ReadonlyArray<{ path: string; symlinkTo?: string }>;
  /** Read-only at the same path: the runtime, the packages the tool host loads, the operator's extras. */
  readOnly: readonly string[];
  /** The session's tool folder, read-write; the tools start in it. */
  workdir: string;
  /**
   * The session's memory store folders: `hostPath` (default `path`) bound at `path`, where the
   * agent sees it (a session's own copy of a store is bound at the store's mount path).
   */
  stores: ReadonlyArray<{ hostPath?: string; path: string; readOnly: boolean }>;
  /** The operator's extra read-write paths. */
  readWrite: readonly string[];
  /** Paths to mask, with what they are on the host; only those inside a bound path are masked. */
  hide: ReadonlyArray<{ path: string; kind: 'dir' | 'file' }>;
  network: 'host' | 'none';
  /** Create a user namespace (the worker gives every sandbox one, a root worker's too). */
  userNamespace: boolean;
  /** Refuse user namespaces inside the sandbox (`--disable-userns`, bubblewrap 0.8; needs `userNamespace`). */
  disableNestedUserNamespaces?: boolean;
  /** The whole environment of the sandbox's first process. */
  env: Readonly<Record<string, string>>;
  /** The program and its arguments. */
  command: readonly string[];
  /** Bytes of each of `/tmp` and `/dev/shm`; `null` or absent: the kernel's tmpfs default (half of RAM). */
  tmpBytes?: number | null;
}

/** True when `p` is `root` or inside it (both absolute and normalised). */
export function isPathInside(root: string, p: string): boolean {
  if (root === '/') return p.startsWith('/');
  return p === root || p.startsWith(`${root}/`);
}

/** Every path the view binds from the host, in the order they are bound. */
export function boundPaths(view: SandboxView): string[] {
  return [
    ...view.system.filter((s) => s.symlinkTo === undefined).map((s) => s.path),
    ...view.readOnly,
    view.workdir,
    ...view.stores.map((s) => s.path),
    ...view.readWrite,
  ];
}

/** The hidden paths that would otherwise be visible: those inside a bound path. */
export function maskedPaths(view: SandboxView): Array<{ path: string; kind: 'dir' | 'file' }> {
  const bound = boundPaths(view);
  return view.hide.filter((h) => bound.some((b) => isPathInside(b, h.path)));
}

/** The bubblewrap arguments (without the executable) that start `view.command` in the view. */
export function bwrapArgs(view: SandboxView): string[] {
  const args = ['--die-with-parent', '--new-session', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try'];
  if (view.userNamespace) args.push('--unshare-user');
  if (view.userNamespace && view.disableNestedUserNamespaces === true) args.push('--disable-userns');
  if (view.network === 'none') args.push('--unshare-net');
  args.push('--cap-drop', 'ALL', '--clearenv');
  for (const [name, value] of Object.entries(view.env)) args.push('--setenv', name, value);
  for (const s of view.system) {
    if (s.symlinkTo !== undefined) args.push('--symlink', s.symlinkTo, s.path);
    else args.push('--ro-bind', s.path, s.path);
  }
  // /tmp comes before the binds, so a workdir or store under /tmp is bound on top of the private one.
  const size = view.tmpBytes != null ? ['--size', String(view.tmpBytes)] : [];
  // /dev/shm is a sized tmpfs of its own; the rest of /dev is read-only (its devices still work).
  args.push('--proc', '/proc', '--dev', '/dev', ...size, '--tmpfs', '/dev/shm', '--remount-ro', '/dev', ...size, '--tmpfs', '/tmp');
  for (const p of view.readOnly) args.push('--ro-bind', p, p);
  args.push('--bind', view.workdir, view.workdir);
  for (const s of view.stores) args.push(s.readOnly ? '--ro-bind' : '--bind', s.hostPath ?? s.path, s.path);
  for (const p of view.readWrite) args.push('--bind', p, p);
  for (const h of maskedPaths(view)) {
    if (h.kind === 'dir') args.push('--tmpfs', h.path);
    else args.push('--ro-bind', '/dev/null', h.path);
  }
  args.push('--chdir', view.workdir, '--', ...view.command);
  return args;
}
