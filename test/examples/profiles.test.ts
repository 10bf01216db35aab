// Pins the container profiles the package ships (profiles/, docs/containers.md): the seccomp
// profile is an OCI-format allow-list for x86_64 and aarch64 (with their 32-bit companions) that
// holds every call bubblewrap 0.8 makes to build a session's sandbox and every call a Node, bash
// and coreutils workload made in the podman trial, refuses the host-facing and exploit-prone calls
// a container never needs, and is exactly what profiles/generate-seccomp.mjs writes; the AppArmor
// profile grants what bubblewrap needs and keeps the runtime default's /proc and /sys rules without
// blocking the user-namespace limit bubblewrap writes. Both ship in the npm package.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const exec = promisify(execFile);
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SECCOMP = path.join(REPO, 'profiles/seccomp-bubblewrap.json');
const APPARMOR = path.join(REPO, 'profiles/apparmor-bubblewrap');

interface SeccompProfile {
  defaultAction: string;
  defaultErrnoRet?: number;
  architectures?: string[];
  archMap?: unknown;
  syscalls: Array<{ names: string[]; action: string; args?: unknown[]; errnoRet?: number }>;
}

const words = (s: string): string[] => s.split(/\s+/).filter(Boolean);

/** What bubblewrap 0.8 calls to build a sandbox with a session's arguments (`strace -f -c` in podman). */
const BUBBLEWRAP_CALLS = words(`
  clone unshare mount umount2 pivot_root prctl capget capset setsid socket bind sendto recvfrom
  execve openat newfstatat mkdir symlink readlink chdir fchdir getdents64 statfs umask poll wait4
  signalfd4 eventfd2 fcntl dup2 getrandom prlimit64 rseq set_robust_list set_tid_address
`);

/** Calls a Node 20 / bash / coreutils workload made in the same trial (HTTP on loopback, fs.watch, workers, tar). */
const WORKLOAD_CALLS = words(`
  accept4 clone3 connect copy_file_range epoll_create1 epoll_ctl epoll_pwait futex inotify_add_watch
  inotify_init1 ioprio_set listen madvise mprotect pipe2 pkey_alloc renameat2 sched_getaffinity
  sched_setaffinity sched_setscheduler setpriority sigaltstack socketpair statx sysinfo timer_create
  timer_settime unlinkat utimensat vfork writev fsetxattr fgetxattr flock
`);

/** Refused whatever else changes: the host's kernel, clock and devices, and the known escape routes. */
const DENIED = words(`
  kexec_load kexec_file_load init_module finit_module delete_module reboot swapon swapoff acct
  settimeofday clock_settime adjtimex clock_adjtime iopl ioperm syslog open_by_handle_at bpf
  perf_event_open keyctl add_key request_key lookup_dcookie quotactl nfsservctl uselib vhangup
  userfaultfd ptrace process_vm_readv process_vm_writev io_uring_setup setns fsopen fsconfig
`);

const loadSeccomp = (): SeccompProfile => JSON.parse(fs.readFileSync(SECCOMP, 'utf8')) as SeccompProfile;

describe('the seccomp profile', () => {
  it('is an allow-list in the OCI layout for x86_64 and aarch64 with their 32-bit companions', () => {
    const p = loadSeccomp();
    expect(p.defaultAction).toBe('SCMP_ACT_ERRNO');
    // ENOSYS: a call the list does not know looks absent, so libc falls back.
    expect(p.defaultErrnoRet).toBe(38);
    // containerd reads Localhost profiles into the runtime-spec type, which has no archMap.
    expect(p.archMap).toBeUndefined();
    expect(p.architectures).toEqual(['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32', 'SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM']);
    expect(p.syscalls).toHaveLength(1);
    expect(p.syscalls[0]).toEqual({ names: expect.any(Array), action: 'SCMP_ACT_ALLOW' });
  });

  it('names each call once, sorted', () => {
    const names = loadSeccomp().syscalls[0]!.names;
    expect(names).toEqual([...new Set(names)].sort());
    expect(names.length).toBeGreaterThan(300);
  });

  it('allows every call bubblewrap makes to build a sandbox, and what Node, bash and coreutils made', () => {
    const allowed = new Set(loadSeccomp().syscalls[0]!.names);
    expect(BUBBLEWRAP_CALLS.filter((n) => !allowed.has(n))).toEqual([]);
    expect(WORKLOAD_CALLS.filter((n) => !allowed.has(n))).toEqual([]);
    // The 32-bit and aarch64 spellings of everyday calls are there too.
    expect(
      ['mmap2', 'fcntl64', '_llseek', 'socketcall', 'fstatat64', 'clock_gettime64', 'set_tls', 'cacheflush'].filter((n) => !allowed.has(n)),
    ).toEqual([]);
  });

  it('refuses the host-facing and exploit-prone calls', () => {
    const allowed = new Set(loadSeccomp().syscalls[0]!.names);
    expect(DENIED.filter((n) => allowed.has(n))).toEqual([]);
  });

  it('is exactly what profiles/generate-seccomp.mjs writes, in one compact line', async () => {
    const { stdout } = await exec(process.execPath, [path.join(REPO, 'profiles/generate-seccomp.mjs'), '--stdout']);
    const shipped = fs.readFileSync(SECCOMP, 'utf8');
    expect(stdout, 'run `node profiles/generate-seccomp.mjs` and commit the profile').toBe(shipped);
    expect(shipped.split('\n')).toEqual([expect.any(String), '']);
    expect(Buffer.byteLength(shipped)).toBeLessThan(8 * 1024);
  });
});

describe('the AppArmor profile', () => {
  const text = fs.readFileSync(APPARMOR, 'utf8');
  const rules = text
    .split('\n')
    .map((l) => l.replace(/#.*/, '').trim())
    .filter(Boolean);

  it('is named as the Kubernetes example names it, and grants what bubblewrap needs', () => {
    expect(text).toMatch(/^profile managed-agents-worker-bubblewrap flags=\(attach_disconnected,mediate_deleted\) \{$/m);
    for (const rule of ['userns,', 'mount,', 'umount,', 'pivot_root,', 'capability,', 'file,', 'network,']) expect(rules).toContain(rule);
    expect(rules).toContain('abi <abi/4.0>,');
  });

  it("keeps the runtime default's /proc and /sys rules, without refusing the user-namespace limit bubblewrap writes", () => {
    const denies = rules.filter((r) => r.startsWith('deny '));
    for (const path of ['@{PROC}/sysrq-trigger', '@{PROC}/kcore', '/sys/firmware/**', '/sys/kernel/security/**'])
      expect(denies.some((r) => r.includes(path))).toBe(true);
    expect(denies).toContain('deny @{PROC}/sys/{abi,crypto,debug,dev,fs,kernel,net,vm}/** w,');
    // bubblewrap --disable-userns writes /proc/sys/user/max_user_namespaces in the sandbox's namespace.
    expect(denies.filter((r) => r.includes('@{PROC}/**') || /@\{PROC\}\/sys\/(\[|\*|\{[^}]*user|user)/.test(r))).toEqual([]);
  });

  it.skipIf(!hasAppArmor4())('parses with apparmor_parser 4 (without loading it)', async () => {
    await exec('apparmor_parser', ['-Q', '-K', APPARMOR]);
  });
});

describe('the npm package', () => {
  it('ships the profiles', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { files: string[] };
    expect(pkg.files).toContain('profiles');
  });
});

/** True when an AppArmor 4 parser is on PATH (the profile uses abi 4.0 for `userns,`). */
function hasAppArmor4(): boolean {
  for (const dir of (process.env['PATH'] ?? '').split(':').concat('/usr/sbin', '/sbin')) {
    if (!fs.existsSync(path.join(dir, 'apparmor_parser'))) continue;
    return fs.existsSync('/etc/apparmor.d/abi/4.0');
  }
  return false;
}
