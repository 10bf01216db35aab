/**
 * A small assembler for classic BPF, the language of seccomp filters: steps with named jump
 * targets in, the kernel's `struct sock_filter` array out (8 bytes per instruction: u16 code,
 * u8 jt, u8 jf, u32 k, little-endian, the byte order of every architecture a filter is built for).
 *
 * Only what a seccomp filter needs: 32-bit loads from `struct seccomp_data`, the four conditional
 * jumps against a constant, and returns. A conditional jump reaches at most 255 instructions ahead
 * (the width of jt/jf); a target further away is refused here, never silently wrapped.
 */

import { InternalError } from '../../errors.js';

/** One instruction as the kernel reads it. */
export interface BpfInstruction {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

/** Instruction codes (class | size | mode | op | source) of the instructions assembled here. */
export const BPF_CODE = {
  /** `A = *(u32 *)(data + k)` */
  loadWord: 0x20,
  /** `pc += 1 + k` */
  jump: 0x05,
  /** `pc += 1 + (A == k ? jt : jf)` */
  jumpIfEqual: 0x15,
  /** `pc += 1 + (A > k ? jt : jf)`, unsigned */
  jumpIfGreater: 0x25,
  /** `pc += 1 + (A >= k ? jt : jf)`, unsigned */
  jumpIfGreaterOrEqual: 0x35,
  /** `pc += 1 + (A & k ? jt : jf)` */
  jumpIfAnyBit: 0x45,
  /** return k */
  returnConstant: 0x06,
} as const;

/** Where a conditional jump goes: a label, or `'next'` for the instruction that follows. */
export type BpfTarget = string;

export type BpfStep =
  | { op: 'label'; name: string }
  | { op: 'load'; offset: number }
  | { op: 'jeq' | 'jgt' | 'jge' | 'jset'; k: number; then: BpfTarget; else: BpfTarget }
  | { op: 'goto'; to: BpfTarget }
  | { op: 'return'; value: number };

const CONDITIONAL = {
  jeq: BPF_CODE.jumpIfEqual,
  jgt: BPF_CODE.jumpIfGreater,
  jge: BPF_CODE.jumpIfGreaterOrEqual,
  jset: BPF_CODE.jumpIfAnyBit,
} as const;

/** The longest program the kernel accepts (BPF_MAXINSNS). */
export const BPF_MAX_INSTRUCTIONS = 4096;

/** Resolve the labels of `steps` into instructions. Throws on an unknown, repeated or too distant label. */
export function assemble(steps: readonly BpfStep[]): BpfInstruction[] {
  const at = new Map<string, number>();
  let count = 0;
  for (const s of steps) {
    if (s.op !== 'label') {
      count++;
      continue;
    }
    if (s.name === 'next' || at.has(s.name)) throw new InternalError(`BPF label ${s.name} is reserved or defined twice`);
    at.set(s.name, count);
  }
  if (count > BPF_MAX_INSTRUCTIONS) throw new InternalError(`BPF program of ${count} instructions exceeds ${BPF_MAX_INSTRUCTIONS}`);
  const out: BpfInstruction[] = [];
  const offset = (target: BpfTarget, max: number): number => {
    if (target === 'next') return 0;
    const to = at.get(target);
    if (to === undefined) throw new InternalError(`BPF label ${target} is not defined`);
    const distance = to - (out.length + 1);
    if (distance < 0 || distance > max)
      throw new InternalError(`BPF jump from ${out.length} to ${target} (${distance}) is out of range 0..${max}`);
    return distance;
  };
  for (const s of steps) {
    switch (s.op) {
      case 'label':
        break;
      case 'load':
        out.push({ code: BPF_CODE.loadWord, jt: 0, jf: 0, k: s.offset });
        break;
      case 'goto':
        out.push({ code: BPF_CODE.jump, jt: 0, jf: 0, k: offset(s.to, 0xffff_ffff) });
        break;
      case 'return':
        out.push({ code: BPF_CODE.returnConstant, jt: 0, jf: 0, k: s.value >>> 0 });
        break;
      default:
        out.push({ code: CONDITIONAL[s.op], jt: offset(s.then, 255), jf: offset(s.else, 255), k: s.k >>> 0 });
    }
  }
  return out;
}

/** The program as the bytes bubblewrap's `--seccomp` reads (little-endian `struct sock_filter[]`). */
export function encode(program: readonly BpfInstruction[]): Buffer {
  const buf = Buffer.alloc(program.length * 8);
  program.forEach((ins, i) => {
    buf.writeUInt16LE(ins.code, i * 8);
    buf.writeUInt8(ins.jt, i * 8 + 2);
    buf.writeUInt8(ins.jf, i * 8 + 3);
    buf.writeUInt32LE(ins.k >>> 0, i * 8 + 4);
  });
  return buf;
}

/** @internal The instructions of an encoded program (for tests and inspection). */
export function decode(buf: Buffer): BpfInstruction[] {
  if (buf.length % 8 !== 0) throw new InternalError(`a BPF program is a multiple of 8 bytes, got ${buf.length}`);
  const out: BpfInstruction[] = [];
  for (let i = 0; i < buf.length; i += 8) {
    out.push({ code: buf.readUInt16LE(i), jt: buf.readUInt8(i + 2), jf: buf.readUInt8(i + 3), k: buf.readUInt32LE(i + 4) });
  }
  return out;
}
