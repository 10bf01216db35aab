// The sandbox's seccomp filter, decided without a kernel: the assembled program for x86_64 and for
// aarch64 is run by a small classic-BPF interpreter over a `struct seccomp_data` built here, and
// each row of the decision table (refused calls and their errno, the calls and arguments that
// stay allowed, other architectures, x32) must come out as written. The syscall numbers are
// checked against the kernel headers of this host when they are installed.
import * as fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { assemble, decode, encode, type BpfInstruction } from '../../../src/sandbox/seccomp/bpf.js';
import { filterProgram, hostSeccompFilter, seccompArchOf } from '../../../src/sandbox/seccomp/filter.js';
import { SYSCALL_NAMES, SYSCALL_NUMBERS, type SeccompArch } from '../../../src/sandbox/seccomp/syscalls.js';

const RET_ALLOW = 0x7fff_0000;
const errno = (e: number): number => 0x0005_0000 | e;
const EPERM = errno(1);
const ENOSYS = errno(38);
const EAFNOSUPPORT = errno(97);

const ARCH = { x86_64: 0xc000_003e, aarch64: 0xc000_00b7, i386: 0x4000_0003, arm: 0x4000_0028 };

/** A classic-BPF interpreter with the kernel's rules: aligned 32-bit loads inside the data, forward jumps, a return at the end. */
function run(program: readonly BpfInstruction[], data: Buffer): number {
  let a = 0;
  let pc = 0;
  for (let steps = 0; steps <= program.length; steps++) {
    const ins = program[pc];
    if (!ins) throw new Error(`pc ${pc} ran off the program`);
    const next = (offset: number): void => {
      pc += 1 + offset;
    };
    switch (ins.code) {
      case 0x20:
        if (ins.k % 4 !== 0 || ins.k + 4 > data.length) throw new Error(`load at ${ins.k} is outside seccomp_data`);
        a = data.readUInt32LE(ins.k);
        next(0);
        break;
      case 0x05:
        next(ins.k);
        break;
      case 0x15:
        next(a === ins.k ? ins.jt : ins.jf);
        break;
      case 0x25:
        next(a > ins.k ? ins.jt : ins.jf);
        break;
      case 0x35:
        next(a >= ins.k ? ins.jt : ins.jf);
        break;
      case 0x45:
        next((a & ins.k) !== 0 ? ins.jt : ins.jf);
        break;
      case 0x06:
        return ins.k;
      default:
        throw new Error(`unknown BPF code 0x${ins.code.toString(16)}`);
    }
  }
  throw new Error('the program did not return');
}

/** `struct seccomp_data`: int nr, u32 arch, u64 instruction_pointer, u64 args[6]. */
function seccompData(arch: number, nr: number, args: bigint[] = []): Buffer {
  const buf = Buffer.alloc(64);
  buf.writeUInt32LE(nr >>> 0, 0);
  buf.writeUInt32LE(arch >>> 0, 4);
  buf.writeBigUInt64LE(0x7f00_0000_1000n, 8);
  args.forEach((v, i) => buf.writeBigUInt64LE(BigInt.asUintN(64, v), 16 + 8 * i));
  return buf;
}

/** Numbers of a few everyday calls, to show they pass. */
const EVERYDAY: Record<SeccompArch, Record<string, number>> = {
  x86_64: { read: 0, write: 1, mmap: 9, execve: 59, futex: 202, openat: 257, getdents64: 217, connect: 42 },
  aarch64: { read: 63, write: 64, mmap: 222, execve: 221, futex: 98, openat: 56, getdents64: 61, connect: 203 },
};

const REFUSED: Array<{ name: (typeof SYSCALL_NAMES)[number]; ret: number }> = [
  { name: 'unshare', ret: EPERM },
  { name: 'setns', ret: EPERM },
  { name: 'clone3', ret: ENOSYS },
  { name: 'mount', ret: EPERM },
  { name: 'umount2', ret: EPERM },
  { name: 'pivot_root', ret: EPERM },
  { name: 'chroot', ret: EPERM },
  { name: 'open_tree', ret: EPERM },
  { name: 'open_tree_attr', ret: EPERM },
  { name: 'move_mount', ret: EPERM },
  { name: 'fsopen', ret: EPERM },
  { name: 'fsconfig', ret: EPERM },
  { name: 'fsmount', ret: EPERM },
  { name: 'fspick', ret: EPERM },
  { name: 'mount_setattr', ret: EPERM },
  { name: 'io_uring_setup', ret: ENOSYS },
  { name: 'io_uring_enter', ret: ENOSYS },
  { name: 'io_uring_register', ret: ENOSYS },
  { name: 'ptrace', ret: EPERM },
  { name: 'process_vm_readv', ret: EPERM },
  { name: 'process_vm_writev', ret: EPERM },
  { name: 'keyctl', ret: EPERM },
  { name: 'add_key', ret: EPERM },
  { name: 'request_key', ret: EPERM },
  { name: 'perf_event_open', ret: EPERM },
  { name: 'bpf', ret: EPERM },
  { name: 'userfaultfd', ret: EPERM },
  { name: 'kexec_load', ret: EPERM },
  { name: 'kexec_file_load', ret: EPERM },
];

const CLONE_NEW = {
  NEWNS: 0x20000,
  NEWCGROUP: 0x2000000,
  NEWUTS: 0x4000000,
  NEWIPC: 0x8000000,
  NEWUSER: 0x10000000,
  NEWPID: 0x20000000,
  NEWNET: 0x40000000,
};
const SIGCHLD = 17;
/** What glibc's pthread_create passes. */
const THREAD_FLAGS = 0x3d0f00;

for (const arch of ['x86_64', 'aarch64'] as const) {
  describe(`the filter on ${arch}`, () => {
    const program = filterProgram(arch);
    const nr = SYSCALL_NUMBERS[arch];
    const decide = (n: number, args: bigint[] = [], auditArch = ARCH[arch]): number => run(program, seccompData(auditArch, n, args));

    it.each(REFUSED)('refuses $name', ({ name, ret }) => {
      expect(decide(nr[name]).toString(16)).toBe(ret.toString(16));
      // Whatever the arguments.
      expect(decide(nr[name], [0xffff_ffff_ffff_ffffn, 1n, 2n]).toString(16)).toBe(ret.toString(16));
    });

    it('allows everyday calls', () => {
      for (const n of Object.values(EVERYDAY[arch])) expect(decide(n, [3n, 0n, 4096n])).toBe(RET_ALLOW);
    });

    it('allows fork and thread creation by clone, refuses clone with any namespace flag', () => {
      expect(decide(nr.clone, [BigInt(SIGCHLD)])).toBe(RET_ALLOW);
      expect(decide(nr.clone, [BigInt(THREAD_FLAGS)])).toBe(RET_ALLOW);
      // The kernel reads the low 32 bits of the flags only: bits above change nothing.
      expect(decide(nr.clone, [0x1_0000_0000n | BigInt(SIGCHLD)])).toBe(RET_ALLOW);
      for (const [flag, bit] of Object.entries(CLONE_NEW)) {
        expect({ flag, ret: decide(nr.clone, [BigInt(bit | SIGCHLD)]) }).toEqual({ flag, ret: EPERM });
      }
      expect(decide(nr.clone, [0xffff_ffff_0000_0000n | BigInt(CLONE_NEW.NEWUSER)])).toBe(EPERM);
    });

    it.each([
      { family: 1, name: 'AF_UNIX', ret: RET_ALLOW },
      { family: 2, name: 'AF_INET', ret: RET_ALLOW },
      { family: 10, name: 'AF_INET6', ret: RET_ALLOW },
      { family: 16, name: 'AF_NETLINK', ret: RET_ALLOW },
      { family: 0, name: 'AF_UNSPEC', ret: EAFNOSUPPORT },
      { family: 17, name: 'AF_PACKET', ret: EAFNOSUPPORT },
      { family: 31, name: 'AF_BLUETOOTH', ret: EAFNOSUPPORT },
      { family: 38, name: 'AF_ALG', ret: EAFNOSUPPORT },
      { family: 40, name: 'AF_VSOCK', ret: EAFNOSUPPORT },
      { family: 44, name: 'AF_XDP', ret: EAFNOSUPPORT },
    ])('socket and socketpair of $name: $ret', ({ family, ret }) => {
      expect(decide(nr.socket, [BigInt(family), 1n, 0n])).toBe(ret);
      expect(decide(nr.socketpair, [BigInt(family), 1n, 0n, 0x7ff0n])).toBe(ret);
    });

    it('refuses TIOCSTI and TIOCLINUX, whatever the upper half of the request; other ioctls pass', () => {
      expect(decide(nr.ioctl, [0n, 0x5412n, 0x7ff0n])).toBe(EPERM);
      expect(decide(nr.ioctl, [0n, 0xffff_ffff_0000_5412n, 0x7ff0n])).toBe(EPERM);
      expect(decide(nr.ioctl, [0n, 0x541cn, 0x7ff0n])).toBe(EPERM);
      expect(decide(nr.ioctl, [0n, 0x5401n, 0x7ff0n])).toBe(RET_ALLOW); // TCGETS
      expect(decide(nr.ioctl, [3n, 0x541bn, 0x7ff0n])).toBe(RET_ALLOW); // FIONREAD
      // The request is the second argument: a TIOCSTI value as the descriptor changes nothing.
      expect(decide(nr.ioctl, [0x5412n, 0x5401n])).toBe(RET_ALLOW);
    });

    it('refuses every call made for another architecture, even an everyday one', () => {
      const other = arch === 'x86_64' ? ARCH.aarch64 : ARCH.x86_64;
      for (const foreign of [other, ARCH.i386, ARCH.arm, 0]) {
        expect(decide(0, [], foreign)).toBe(ENOSYS);
        expect(decide(nr.unshare, [BigInt(CLONE_NEW.NEWUSER)], foreign)).toBe(ENOSYS);
      }
    });

    it('is the same program every time, a whole number of instructions', () => {
      const buf = encode(program);
      expect(buf.length).toBe(program.length * 8);
      expect(decode(buf)).toEqual(program);
      expect(program.at(-1)?.code).toBe(0x06);
    });
  });
}

describe('x86_64 specifics', () => {
  const program = filterProgram('x86_64');
  it('refuses the x32 ABI (numbers with bit 30 set), which has its own table', () => {
    for (const n of [0, 1, 59, 272, 546]) {
      expect(run(program, seccompData(ARCH.x86_64, 0x4000_0000 | n))).toBe(ENOSYS);
    }
  });
});

describe('the assembler', () => {
  it('refuses a jump target it does not know, and a jump further than 255 instructions', () => {
    expect(() => assemble([{ op: 'jeq', k: 1, then: 'nowhere', else: 'next' }])).toThrow(/nowhere is not defined/);
    const far = [
      { op: 'jeq', k: 1, then: 'end', else: 'next' } as const,
      ...Array.from({ length: 256 }, () => ({ op: 'return', value: 0 }) as const),
      { op: 'label', name: 'end' } as const,
      { op: 'return', value: 1 } as const,
    ];
    expect(() => assemble(far)).toThrow(/out of range/);
  });
});

describe('the host filter', () => {
  it('exists for x64 and arm64 only', () => {
    expect(seccompArchOf('x64')).toBe('x86_64');
    expect(seccompArchOf('arm64')).toBe('aarch64');
    expect(hostSeccompFilter('ppc64')).toBeUndefined();
    // A big-endian arm64 has another arch value and byte order: no filter rather than a wrong one.
    expect(seccompArchOf('arm64', 'BE')).toBeUndefined();
    expect(hostSeccompFilter('x64')).toEqual(encode(filterProgram('x86_64')));
  });
});

/** `#define __NR_name number` lines of a header, when it is installed. */
function headerNumbers(file: string, prefix: RegExp): Map<string, number> | undefined {
  if (!fs.existsSync(file)) return undefined;
  const out = new Map<string, number>();
  for (const m of fs.readFileSync(file, 'utf8').matchAll(new RegExp(`^#define ${prefix.source}(\\w+)\\s+(\\d+)\\s*$`, 'gm'))) {
    out.set(m[1]!, Number(m[2]));
  }
  return out;
}

describe('the syscall numbers', () => {
  const x86 =
    headerNumbers('/usr/include/x86_64-linux-gnu/asm/unistd_64.h', /__NR_/) ?? headerNumbers('/usr/include/asm/unistd_64.h', /__NR_/);
  const generic = headerNumbers('/usr/include/asm-generic/unistd.h', /__NR(?:3264)?_/);
  it.runIf(x86 !== undefined)("match this host's x86_64 kernel headers", () => {
    const named = SYSCALL_NAMES.filter((name) => x86!.has(name));
    // Headers older than a call do not name it; those of Linux 5.12 on name all but open_tree_attr.
    expect(named.length).toBeGreaterThan(SYSCALL_NAMES.length - 3);
    for (const name of named) expect({ name, n: x86!.get(name) }).toEqual({ name, n: SYSCALL_NUMBERS.x86_64[name] });
  });
  it.runIf(generic !== undefined)("match the kernel's generic table, which aarch64 uses", () => {
    const named = SYSCALL_NAMES.filter((name) => generic!.has(name));
    expect(named.length).toBeGreaterThan(SYSCALL_NAMES.length - 3);
    for (const name of named) expect({ name, n: generic!.get(name) }).toEqual({ name, n: SYSCALL_NUMBERS.aarch64[name] });
  });
});
