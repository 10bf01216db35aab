import * as os from 'node:os';
import { assemble, encode, type BpfInstruction, type BpfStep } from './bpf.js';
import { AUDIT_ARCH, SYSCALL_NUMBERS, X32_SYSCALL_BIT, type SeccompArch, type SyscallName } from './syscalls.js';

/**
 * The seccomp filter every sandboxed process runs under (bubblewrap installs it just before it
 * starts the tool host, and it applies to the sandbox's init too). Everything is allowed except
 * the kernel surfaces an agent has no use for and an escape would start from:
 *
 * | refused                                                              | errno          |
 * |----------------------------------------------------------------------|----------------|
 * | `unshare`, `setns`; `clone` with any `CLONE_NEW*` flag               | EPERM          |
 * | `clone3` (its flags sit in memory a filter cannot read)              | ENOSYS: libc falls back to `clone` |
 * | `mount`, `umount2`, `pivot_root`, `chroot`; `open_tree`, `open_tree_attr`, `move_mount`, `fsopen`, `fsconfig`, `fsmount`, `fspick`, `mount_setattr` | EPERM |
 * | `io_uring_setup`, `io_uring_enter`, `io_uring_register`              | ENOSYS: callers fall back to plain I/O |
 * | `ptrace`, `process_vm_readv`, `process_vm_writev`                    | EPERM          |
 * | `keyctl`, `add_key`, `request_key`                                   | EPERM          |
 * | `perf_event_open`, `bpf`, `userfaultfd`, `kexec_load`, `kexec_file_load` | EPERM      |
 * | `socket`, `socketpair` with a family other than unix, inet, inet6, netlink | EAFNOSUPPORT, as for a family the kernel lacks |
 * | `ioctl` `TIOCSTI` (push input into a terminal), `TIOCLINUX` (its console cousin) | EPERM |
 * | any call of another architecture (32-bit calls on a 64-bit host) or of x86's x32 ABI | ENOSYS |
 *
 * The other architecture's calls are refused because they come with numbers of their own, which
 * this filter does not list: letting them through would let `int 0x80` reach `unshare` by another
 * number. Arguments are compared on their low 32 bits, the part the kernel reads for each of them
 * (flags of `clone`, the family of `socket`, the request of `ioctl`).
 */

export const ERRNO = { EPERM: 1, ENOSYS: 38, EAFNOSUPPORT: 97 } as const;
export type RefusalErrno = keyof typeof ERRNO;

/** Calls refused whatever their arguments, and the errno they get. */
export const REFUSED_SYSCALLS: Readonly<Partial<Record<SyscallName, 'EPERM' | 'ENOSYS'>>> = {
  unshare: 'EPERM',
  setns: 'EPERM',
  clone3: 'ENOSYS',
  mount: 'EPERM',
  umount2: 'EPERM',
  pivot_root: 'EPERM',
  chroot: 'EPERM',
  open_tree: 'EPERM',
  open_tree_attr: 'EPERM',
  move_mount: 'EPERM',
  fsopen: 'EPERM',
  fsconfig: 'EPERM',
  fsmount: 'EPERM',
  fspick: 'EPERM',
  mount_setattr: 'EPERM',
  io_uring_setup: 'ENOSYS',
  io_uring_enter: 'ENOSYS',
  io_uring_register: 'ENOSYS',
  ptrace: 'EPERM',
  process_vm_readv: 'EPERM',
  process_vm_writev: 'EPERM',
  keyctl: 'EPERM',
  add_key: 'EPERM',
  request_key: 'EPERM',
  perf_event_open: 'EPERM',
  bpf: 'EPERM',
  userfaultfd: 'EPERM',
  kexec_load: 'EPERM',
  kexec_file_load: 'EPERM',
};

/** CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET. */
export const CLONE_NAMESPACE_FLAGS = 0x0002_0000 | 0x0200_0000 | 0x0400_0000 | 0x0800_0000 | 0x1000_0000 | 0x2000_0000 | 0x4000_0000;

/** Socket families a sandboxed process may open: AF_UNIX, AF_INET, AF_INET6, AF_NETLINK. */
export const ALLOWED_SOCKET_FAMILIES: readonly number[] = [1, 2, 10, 16];

/** `ioctl` requests refused: TIOCSTI, TIOCLINUX. */
export const REFUSED_IOCTLS: readonly number[] = [0x5412, 0x541c];

/** What a filter returns (SECCOMP_RET_*). */
export const SECCOMP_RET = { allow: 0x7fff_0000, errno: 0x0005_0000 } as const;

/** Offsets in `struct seccomp_data`: the call's number, its architecture, the low half of argument i. */
const DATA = { nr: 0, arch: 4, argLow: (i: number) => 16 + 8 * i } as const;

const errnoReturn = (e: RefusalErrno): number => SECCOMP_RET.errno | ERRNO[e];

/** The filter's steps for `arch` (see the table above). */
export function filterSteps(arch: SeccompArch): BpfStep[] {
  const nr = SYSCALL_NUMBERS[arch];
  const refused = Object.entries(REFUSED_SYSCALLS) as Array<[SyscallName, 'EPERM' | 'ENOSYS']>;
  return [
    { op: 'load', offset: DATA.arch },
    { op: 'jeq', k: AUDIT_ARCH[arch], then: 'next', else: 'ENOSYS' },
    { op: 'load', offset: DATA.nr },
    ...(arch === 'x86_64' ? [{ op: 'jge', k: X32_SYSCALL_BIT, then: 'ENOSYS', else: 'next' } as const] : []),
    { op: 'jeq', k: nr.clone, then: 'clone', else: 'next' },
    { op: 'jeq', k: nr.socket, then: 'socket', else: 'next' },
    { op: 'jeq', k: nr.socketpair, then: 'socket', else: 'next' },
    { op: 'jeq', k: nr.ioctl, then: 'ioctl', else: 'next' },
    ...refused.map(([name, errno]) => ({ op: 'jeq', k: nr[name], then: errno, else: 'next' }) as const),
    { op: 'return', value: SECCOMP_RET.allow },

    { op: 'label', name: 'clone' },
    { op: 'load', offset: DATA.argLow(0) },
    { op: 'jset', k: CLONE_NAMESPACE_FLAGS, then: 'EPERM', else: 'allow' },

    { op: 'label', name: 'socket' },
    { op: 'load', offset: DATA.argLow(0) },
    ...ALLOWED_SOCKET_FAMILIES.map((family) => ({ op: 'jeq', k: family, then: 'allow', else: 'next' }) as const),
    { op: 'return', value: errnoReturn('EAFNOSUPPORT') },

    { op: 'label', name: 'ioctl' },
    { op: 'load', offset: DATA.argLow(1) },
    ...REFUSED_IOCTLS.map((request) => ({ op: 'jeq', k: request, then: 'EPERM', else: 'next' }) as const),

    { op: 'label', name: 'allow' },
    { op: 'return', value: SECCOMP_RET.allow },
    { op: 'label', name: 'EPERM' },
    { op: 'return', value: errnoReturn('EPERM') },
    { op: 'label', name: 'ENOSYS' },
    { op: 'return', value: errnoReturn('ENOSYS') },
  ];
}

/** The filter for `arch`, as instructions. */
export function filterProgram(arch: SeccompArch): BpfInstruction[] {
  return assemble(filterSteps(arch));
}

/** The kernel name of Node's `process.arch`, when a filter is built for it (little-endian hosts only). */
export function seccompArchOf(nodeArch: string, endianness: 'BE' | 'LE' = os.endianness()): SeccompArch | undefined {
  if (endianness !== 'LE') return undefined;
  if (nodeArch === 'x64') return 'x86_64';
  if (nodeArch === 'arm64') return 'aarch64';
  return undefined;
}

const built = new Map<SeccompArch, Buffer>();

/**
 * The encoded filter for this host (what bubblewrap's `--seccomp` reads), or `undefined` on an
 * architecture no filter is built for: there the sandbox runs without one, and `doctor` says so.
 */
export function hostSeccompFilter(nodeArch: string = process.arch): Buffer | undefined {
  const arch = seccompArchOf(nodeArch);
  if (arch === undefined) return undefined;
  let buf = built.get(arch);
  if (!buf) {
    buf = encode(filterProgram(arch));
    built.set(arch, buf);
  }
  return buf;
}
