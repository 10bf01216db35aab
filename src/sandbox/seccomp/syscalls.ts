/**
 * The system call numbers the sandbox's filter names, per architecture, as the kernel numbers
 * them: x86_64 from its 64-bit syscall table, aarch64 from the generic table it shares with the
 * other new architectures. Calls added since Linux 5.1 have one number on both. Only the calls
 * the filter decides about are listed; every other number is allowed without being named.
 */

/** The architectures a filter is built for, by their kernel names. */
export type SeccompArch = 'x86_64' | 'aarch64';

/** The `arch` field of `struct seccomp_data` for each (AUDIT_ARCH_*: machine, 64-bit, little-endian). */
export const AUDIT_ARCH: Readonly<Record<SeccompArch, number>> = {
  x86_64: 0xc000_003e,
  aarch64: 0xc000_00b7,
};

/** On x86_64, the bit that marks a call made through the x32 ABI (same arch value, other table). */
export const X32_SYSCALL_BIT = 0x4000_0000;

export const SYSCALL_NAMES = [
  'ioctl',
  'socket',
  'socketpair',
  'clone',
  'clone3',
  'unshare',
  'setns',
  'mount',
  'umount2',
  'pivot_root',
  'chroot',
  'open_tree',
  'open_tree_attr',
  'move_mount',
  'fsopen',
  'fsconfig',
  'fsmount',
  'fspick',
  'mount_setattr',
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
  'ptrace',
  'process_vm_readv',
  'process_vm_writev',
  'keyctl',
  'add_key',
  'request_key',
  'perf_event_open',
  'bpf',
  'userfaultfd',
  'kexec_load',
  'kexec_file_load',
] as const;

export type SyscallName = (typeof SYSCALL_NAMES)[number];

export const SYSCALL_NUMBERS: Readonly<Record<SeccompArch, Readonly<Record<SyscallName, number>>>> = {
  x86_64: {
    ioctl: 16,
    socket: 41,
    socketpair: 53,
    clone: 56,
    clone3: 435,
    unshare: 272,
    setns: 308,
    mount: 165,
    umount2: 166,
    pivot_root: 155,
    chroot: 161,
    open_tree: 428,
    open_tree_attr: 467,
    move_mount: 429,
    fsopen: 430,
    fsconfig: 431,
    fsmount: 432,
    fspick: 433,
    mount_setattr: 442,
    io_uring_setup: 425,
    io_uring_enter: 426,
    io_uring_register: 427,
    ptrace: 101,
    process_vm_readv: 310,
    process_vm_writev: 311,
    keyctl: 250,
    add_key: 248,
    request_key: 249,
    perf_event_open: 298,
    bpf: 321,
    userfaultfd: 323,
    kexec_load: 246,
    kexec_file_load: 320,
  },
  aarch64: {
    ioctl: 29,
    socket: 198,
    socketpair: 199,
    clone: 220,
    clone3: 435,
    unshare: 97,
    setns: 268,
    mount: 40,
    umount2: 39,
    pivot_root: 41,
    chroot: 51,
    open_tree: 428,
    open_tree_attr: 467,
    move_mount: 429,
    fsopen: 430,
    fsconfig: 431,
    fsmount: 432,
    fspick: 433,
    mount_setattr: 442,
    io_uring_setup: 425,
    io_uring_enter: 426,
    io_uring_register: 427,
    ptrace: 117,
    process_vm_readv: 270,
    process_vm_writev: 271,
    keyctl: 219,
    add_key: 217,
    request_key: 218,
    perf_event_open: 241,
    bpf: 280,
    userfaultfd: 282,
    kexec_load: 104,
    kexec_file_load: 294,
  },
};
