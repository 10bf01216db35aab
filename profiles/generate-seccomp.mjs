#!/usr/bin/env node
// Writes profiles/seccomp-bubblewrap.json, the seccomp profile a container (Docker, podman,
// Kubernetes `seccompProfile: Localhost`) runs the worker under so that bubblewrap can build each
// session's sandbox inside it. See docs/containers.md.
//
// What the profile allows: every system call of the x86_64, i386, x32 and generic (aarch64, arm)
// tables as of Linux 6.17 (the names below), minus DENIED. That is what a container runtime's
// default profile lets a process without added capabilities do, plus what bubblewrap 0.8 needs to
// build a sandbox: unshare, clone/clone3 with namespace flags, mount, umount2 and pivot_root (it
// calls neither setns nor chroot). Anything not named fails with ENOSYS, as on a kernel without it,
// so a newer call than this list knows makes libc and Node fall back instead of failing.
//
// The JSON is written in the OCI runtime-spec layout (`architectures`, not Docker's `archMap`):
// containerd reads a Localhost profile into the runtime-spec type and ignores `archMap`; Docker,
// podman and CRI-O read both. A runtime skips names its libseccomp does not know.
//
// Usage (from the repository root):
//   node profiles/generate-seccomp.mjs            writes the profile
//   node profiles/generate-seccomp.mjs --stdout   prints it instead (the tests compare the two)
//   node profiles/generate-seccomp.mjs --headers  names in this machine's kernel headers that the
//                                                 list below lacks (run it on a newer system to
//                                                 find calls to add)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const OUT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'seccomp-bubblewrap.json');

/** Splits a block of whitespace-separated names. */
const words = (s) => s.split(/\s+/).filter(Boolean);

/**
 * Every system call name of the kernel: the union of asm/unistd_64.h, unistd_32.h, unistd_x32.h
 * and asm-generic/unistd.h of Linux 6.1, then the calls added up to 6.17 (cachestat .. file_setattr,
 * x86_64's uretprobe) and arm's private calls (breakpoint, cacheflush, set_tls, get_tls and the
 * renamed arm_fadvise64_64, arm_sync_file_range).
 */
const KERNEL_SYSCALLS = words(`
  _llseek _newselect _sysctl accept accept4 access acct add_key adjtimex afs_syscall alarm arch_prctl arm_fadvise64_64
  arm_sync_file_range bdflush bind bpf break breakpoint brk cachestat cacheflush capget capset chdir chmod chown chown32
  chroot clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 clock_gettime clock_gettime64 clock_nanosleep
  clock_nanosleep_time64 clock_settime clock_settime64 clone clone3 close close_range connect copy_file_range creat
  create_module delete_module dup dup2 dup3 epoll_create epoll_create1 epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2
  epoll_wait epoll_wait_old eventfd eventfd2 execve execveat exit exit_group faccessat faccessat2 fadvise64
  fadvise64_64 fallocate fanotify_init fanotify_mark fchdir fchmod fchmodat fchmodat2 fchown fchown32 fchownat fcntl
  fcntl64 fdatasync fgetxattr file_getattr file_setattr finit_module flistxattr flock fork fremovexattr fsconfig
  fsetxattr fsmount fsopen fspick fstat fstat64 fstatat64 fstatfs fstatfs64 fsync ftime ftruncate ftruncate64 futex
  futex_requeue futex_time64 futex_wait futex_waitv futex_wake futimesat get_kernel_syms get_mempolicy get_robust_list
  get_thread_area get_tls getcpu getcwd getdents getdents64 getegid getegid32 geteuid geteuid32 getgid getgid32
  getgroups getgroups32 getitimer getpeername getpgid getpgrp getpid getpmsg getppid getpriority getrandom getresgid
  getresgid32 getresuid getresuid32 getrlimit getrusage getsid getsockname getsockopt gettid gettimeofday getuid
  getuid32 getxattr getxattrat gtty idle init_module inotify_add_watch inotify_init inotify_init1 inotify_rm_watch
  io_cancel io_destroy io_getevents io_pgetevents io_pgetevents_time64 io_setup io_submit io_uring_enter
  io_uring_register io_uring_setup ioctl ioperm iopl ioprio_get ioprio_set ipc kcmp kexec_file_load kexec_load keyctl
  kill landlock_add_rule landlock_create_ruleset landlock_restrict_self lchown lchown32 lgetxattr link linkat listen
  listmount listxattr listxattrat llistxattr lock lookup_dcookie lremovexattr lseek lsetxattr lsm_get_self_attr
  lsm_list_modules lsm_set_self_attr lstat lstat64 madvise map_shadow_stack mbind membarrier memfd_create memfd_secret
  migrate_pages mincore mkdir mkdirat mknod mknodat mlock mlock2 mlockall mmap mmap2 modify_ldt mount mount_setattr
  move_mount move_pages mprotect mpx mq_getsetattr mq_notify mq_open mq_timedreceive mq_timedreceive_time64
  mq_timedsend mq_timedsend_time64 mq_unlink mremap mseal msgctl msgget msgrcv msgsnd msync munlock munlockall munmap
  name_to_handle_at nanosleep newfstatat nfsservctl nice oldfstat oldlstat oldolduname oldstat olduname open
  open_by_handle_at open_tree open_tree_attr openat openat2 pause perf_event_open personality pidfd_getfd pidfd_open
  pidfd_send_signal pipe pipe2 pivot_root pkey_alloc pkey_free pkey_mprotect poll ppoll ppoll_time64 prctl pread64
  preadv preadv2 prlimit64 process_madvise process_mrelease process_vm_readv process_vm_writev prof profil pselect6
  pselect6_time64 ptrace putpmsg pwrite64 pwritev pwritev2 query_module quotactl quotactl_fd read readahead readdir
  readlink readlinkat readv reboot recvfrom recvmmsg recvmmsg_time64 recvmsg remap_file_pages removexattr removexattrat
  rename renameat renameat2 request_key restart_syscall rmdir rseq rt_sigaction rt_sigpending rt_sigprocmask
  rt_sigqueueinfo rt_sigreturn rt_sigsuspend rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo
  sched_get_priority_max sched_get_priority_min sched_getaffinity sched_getattr sched_getparam sched_getscheduler
  sched_rr_get_interval sched_rr_get_interval_time64 sched_setaffinity sched_setattr sched_setparam sched_setscheduler
  sched_yield seccomp security select semctl semget semop semtimedop semtimedop_time64 sendfile sendfile64 sendmmsg
  sendmsg sendto set_mempolicy set_mempolicy_home_node set_robust_list set_thread_area set_tid_address set_tls
  setdomainname setfsgid setfsgid32 setfsuid setfsuid32 setgid setgid32 setgroups setgroups32 sethostname setitimer
  setns setpgid setpriority setregid setregid32 setresgid setresgid32 setresuid setresuid32 setreuid setreuid32
  setrlimit setsid setsockopt settimeofday setuid setuid32 setxattr setxattrat sgetmask shmat shmctl shmdt shmget
  shutdown sigaction sigaltstack signal signalfd signalfd4 sigpending sigprocmask sigreturn sigsuspend socket
  socketcall socketpair splice ssetmask stat stat64 statfs statfs64 statmount statx stime stty swapoff swapon symlink
  symlinkat sync sync_file_range sync_file_range2 syncfs sysfs sysinfo syslog tee tgkill time timer_create
  timer_delete timer_getoverrun timer_gettime timer_gettime64 timer_settime timer_settime64 timerfd_create
  timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64 times tkill truncate truncate64 tuxcall
  ugetrlimit ulimit umask umount umount2 uname unlink unlinkat unshare uretprobe uselib userfaultfd ustat utime
  utimensat utimensat_time64 utimes vfork vhangup vm86 vm86old vmsplice vserver wait4 waitid waitpid write writev
`);

/**
 * What the profile refuses, by reason. The first four groups are what runtime default profiles
 * allow only to a process holding a capability (the worker's pod drops them all) or never; the
 * pod needs none of it, and neither does bubblewrap.
 */
export const DENIED = [
  {
    reason:
      "the host's kernel, clock, swap, accounting, quotas, I/O ports, kernel log and terminals: not a container's to change (each also needs a capability of the host)",
    names: words(`
      kexec_load kexec_file_load reboot init_module finit_module delete_module swapon swapoff acct quotactl quotactl_fd
      settimeofday stime clock_settime clock_settime64 adjtimex clock_adjtime clock_adjtime64 iopl ioperm vm86 vm86old
      syslog vhangup
    `),
  },
  {
    reason:
      'kernel interfaces with a record of container escapes or exploit primitives, that neither the worker, bubblewrap, Node nor a shell uses: file handles (the "shocker" escape), BPF, perf, userfaultfd, the keyrings (not namespaced), io_uring (libuv falls back to plain I/O), filesystem-wide fanotify',
    names: words(`
      open_by_handle_at name_to_handle_at bpf perf_event_open userfaultfd keyctl add_key request_key io_uring_setup
      io_uring_enter io_uring_register fanotify_init
    `),
  },
  {
    reason:
      "another process's memory: the worker holds the environment key, and nothing in the pod debugs another process (run a debugger in an ephemeral container of its own)",
    names: words(`ptrace process_vm_readv process_vm_writev kcmp pidfd_getfd process_madvise`),
  },
  {
    reason:
      'namespaces and mounts beyond what bubblewrap 0.8 calls (it uses unshare, clone, mount, umount2 and pivot_root, never setns, chroot or the new mount API), and host names',
    names: words(`
      setns chroot umount fsopen fsconfig fsmount fspick open_tree open_tree_attr move_mount mount_setattr sethostname
      setdomainname
    `),
  },
  {
    reason: 'NUMA memory placement (runtime defaults tie it to CAP_SYS_NICE); ENOSYS reads as a kernel without NUMA, which libnuma handles',
    names: words(`get_mempolicy mbind set_mempolicy set_mempolicy_home_node migrate_pages move_pages`),
  },
  {
    reason: 'removed from the kernel or never implemented on these architectures',
    names: words(`
      _sysctl uselib nfsservctl lookup_dcookie bdflush create_module get_kernel_syms query_module afs_syscall tuxcall
      security vserver getpmsg putpmsg break ftime gtty lock mpx prof profil stty ulimit idle epoll_ctl_old
      epoll_wait_old
    `),
  },
];

/** Architectures as runtimes list them: each 64-bit one with its 32-bit companions. */
const ARCHITECTURES = ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32', 'SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM'];

const ENOSYS = 38;

/** The profile as an object. */
export function profile() {
  const denied = new Set(DENIED.flatMap((g) => g.names));
  const unknown = [...denied].filter((n) => !KERNEL_SYSCALLS.includes(n));
  if (unknown.length > 0) throw new Error(`DENIED names no system call of KERNEL_SYSCALLS: ${unknown.join(', ')}`);
  const names = [...new Set(KERNEL_SYSCALLS)].filter((n) => !denied.has(n)).sort();
  return {
    defaultAction: 'SCMP_ACT_ERRNO',
    defaultErrnoRet: ENOSYS,
    architectures: ARCHITECTURES,
    syscalls: [{ names, action: 'SCMP_ACT_ALLOW' }],
  };
}

/** The file's exact text: compact (it ships in the npm package), one trailing newline. */
export function render() {
  return `${JSON.stringify(profile())}\n`;
}

/** Names this machine's kernel headers define that KERNEL_SYSCALLS lacks. */
function missingFromHeaders() {
  const headers = [
    '/usr/include/x86_64-linux-gnu/asm/unistd_64.h',
    '/usr/include/x86_64-linux-gnu/asm/unistd_32.h',
    '/usr/include/x86_64-linux-gnu/asm/unistd_x32.h',
    '/usr/include/aarch64-linux-gnu/asm/unistd.h',
    '/usr/include/asm-generic/unistd.h',
  ].filter((f) => fs.existsSync(f));
  const found = new Set();
  for (const f of headers) for (const m of fs.readFileSync(f, 'utf8').matchAll(/^#define __NR_([a-z0-9_]+)\s/gm)) found.add(m[1]);
  // Not calls: the table's size, arm's base, and the generic table's name for _llseek.
  for (const n of ['syscalls', 'arch_specific_syscall', 'llseek']) found.delete(n);
  return { headers, missing: [...found].filter((n) => !KERNEL_SYSCALLS.includes(n)).sort() };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const arg = process.argv[2];
  if (arg === '--stdout') process.stdout.write(render());
  else if (arg === '--headers') {
    const { headers, missing } = missingFromHeaders();
    process.stdout.write(
      `read ${headers.join(', ') || 'no header'}\n${missing.length ? `missing: ${missing.join(' ')}` : 'none missing'}\n`,
    );
  } else if (arg === undefined) fs.writeFileSync(OUT, render());
  else {
    process.stderr.write(`generate-seccomp: unknown argument ${arg}; use --stdout, --headers or nothing\n`);
    process.exit(2);
  }
}
