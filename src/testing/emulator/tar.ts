/**
 * A minimal POSIX ustar writer: regular files and directories only, enough for the skill bundles
 * the emulator serves (`tar -xf` and `bsdtar` read it). No dependency.
 */
import { ConfigError } from '../../errors.js';

const BLOCK = 512;

/** One archive member: a directory (name ends with `/`) or a regular file. */
export interface TarEntry {
  name: string;
  /** File content; omit for a directory. */
  content?: Uint8Array;
  /** Permission bits. Default `0o755` for directories, `0o644` for files. */
  mode?: number;
}

/** A ustar archive of `entries`, in order, ending with the two zero blocks. */
export function ustar(entries: TarEntry[], mtimeSeconds: number = Math.floor(Date.now() / 1000)): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    const isDir = entry.content === undefined;
    const data = isDir ? Buffer.alloc(0) : Buffer.from(entry.content!);
    parts.push(header(entry.name, isDir, data.length, entry.mode ?? (isDir ? 0o755 : 0o644), mtimeSeconds));
    if (data.length > 0) {
      parts.push(data);
      const pad = (BLOCK - (data.length % BLOCK)) % BLOCK;
      if (pad > 0) parts.push(Buffer.alloc(pad));
    }
  }
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}

function header(name: string, isDir: boolean, size: number, mode: number, mtime: number): Buffer {
  const h = Buffer.alloc(BLOCK);
  const [prefix, base] = splitName(isDir && !name.endsWith('/') ? `${name}/` : name);
  h.write(base, 0, 100, 'utf8');
  octal(h, 100, 8, mode & 0o7777);
  octal(h, 108, 8, 0); // uid
  octal(h, 116, 8, 0); // gid
  octal(h, 124, 12, size);
  octal(h, 136, 12, mtime);
  h.fill(0x20, 148, 156); // checksum field counts as spaces while summing
  h.write(isDir ? '5' : '0', 156, 1, 'ascii');
  h.write('ustar\0', 257, 6, 'ascii');
  h.write('00', 263, 2, 'ascii');
  h.write('root', 265, 32, 'ascii');
  h.write('root', 297, 32, 'ascii');
  h.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const b of h) sum += b;
  // Six octal digits, NUL, space (the classic layout every reader accepts).
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'ascii');
  return h;
}

/** Split a member name into ustar `prefix` (≤ 155 bytes) and `name` (≤ 100 bytes) at a `/`. */
function splitName(name: string): [string, string] {
  if (Buffer.byteLength(name) <= 100) return ['', name];
  const trailing = name.endsWith('/') ? '/' : '';
  const body = trailing ? name.slice(0, -1) : name;
  for (let i = body.lastIndexOf('/'); i > 0; i = body.lastIndexOf('/', i - 1)) {
    const prefix = body.slice(0, i);
    const rest = body.slice(i + 1) + trailing;
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(rest) <= 100) return [prefix, rest];
  }
  throw new ConfigError(`tar member name too long for ustar (≤ 100 bytes after a ≤ 155-byte directory prefix): ${name}`);
}

function octal(h: Buffer, offset: number, width: number, value: number): void {
  const text = value.toString(8);
  if (text.length > width - 1) throw new ConfigError(`tar header field at ${offset} overflows: ${value}`);
  h.write(`${text.padStart(width - 1, '0')}\0`, offset, width, 'ascii');
}
