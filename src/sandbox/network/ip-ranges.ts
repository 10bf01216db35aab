/**
 * IP addresses as the egress policy sees them: parsed from their text (IPv4 dotted quads, IPv6 with
 * `::` and an embedded IPv4 tail, an optional `%zone`), matched against CIDR ranges, and sorted
 * into the classes a sandbox may not reach on its own. Pure: no name is resolved here.
 *
 * An IPv6 address that carries an IPv4 one (`::ffff:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4
 * `2002:aabb:ccdd::`) is judged as that IPv4 address, so no spelling reaches a refused range.
 */

/** One address: 4 bytes or 16. */
export interface IpAddress {
  family: 4 | 6;
  bytes: Uint8Array;
}

/** A CIDR range (`10.0.0.0/8`, `fc00::/7`); a bare address is a range of one. */
export interface IpRange {
  family: 4 | 6;
  bytes: Uint8Array;
  prefix: number;
}

/** Why an address is not a public one. */
export type AddressClass =
  | 'unspecified'
  | 'loopback'
  | 'link-local'
  | 'private'
  | 'shared'
  | 'multicast'
  | 'broadcast'
  | 'reserved'
  | 'documentation'
  | 'benchmark'
  | 'public';

/** Parse `a.b.c.d` or an IPv6 address; `undefined` when it is neither. */
export function parseIp(text: string): IpAddress | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const v4 = parseIpv4(bare);
  if (v4) return { family: 4, bytes: v4 };
  const v6 = parseIpv6(bare.replace(/%[^%]*$/, ''));
  return v6 ? { family: 6, bytes: v6 } : undefined;
}

function parseIpv4(text: string): Uint8Array | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    // Decimal only, no leading zeros: `010` would be octal to some resolvers.
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out[i] = n;
  }
  return out;
}

function parseIpv6(text: string): Uint8Array | undefined {
  if (!/^[0-9a-fA-F:.]+$/.test(text) || !text.includes(':')) return undefined;
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (s: string): number[] | undefined => {
    if (s === '') return [];
    const out: number[] = [];
    const parts = s.split(':');
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i]!;
      if (i === parts.length - 1 && p.includes('.')) {
        const v4 = parseIpv4(p);
        if (!v4) return undefined;
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else if (/^[0-9a-fA-F]{1,4}$/.test(p)) {
        out.push(parseInt(p, 16));
      } else {
        return undefined;
      }
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const all = [...head, ...Array<number>(halves.length === 2 ? missing : 0).fill(0), ...tail];
  const bytes = new Uint8Array(16);
  all.forEach((g, i) => {
    bytes[i * 2] = g >> 8;
    bytes[i * 2 + 1] = g & 0xff;
  });
  return bytes;
}

/** Parse `address/prefix` or a bare address; `undefined` when malformed. */
export function parseRange(text: string): IpRange | undefined {
  const slash = text.indexOf('/');
  const ip = parseIp(slash < 0 ? text : text.slice(0, slash));
  if (!ip) return undefined;
  const max = ip.family === 4 ? 32 : 128;
  if (slash < 0) return { ...ip, prefix: max };
  const p = text.slice(slash + 1);
  if (!/^[0-9]{1,3}$/.test(p) || Number(p) > max) return undefined;
  return { ...ip, prefix: Number(p) };
}

/** True when `ip` lies in `range` (an IPv4-carrying IPv6 address is compared as its IPv4 form). */
export function inRange(ip: IpAddress, range: IpRange): boolean {
  const a = ip.family === range.family ? ip : ip.family === 6 ? embeddedIpv4(ip) : undefined;
  if (!a || a.family !== range.family) return false;
  let bits = range.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((a.bytes[i]! & mask) !== (range.bytes[i]! & mask)) return false;
  }
  return true;
}

/** The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4), if any. */
export function embeddedIpv4(ip: IpAddress): IpAddress | undefined {
  if (ip.family !== 6) return undefined;
  const b = ip.bytes;
  const zeros = (from: number, to: number): boolean => b.subarray(from, to).every((x) => x === 0);
  const tail = (): IpAddress => ({ family: 4, bytes: b.slice(12, 16) });
  // ::ffff:a.b.c.d (mapped)
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return tail();
  // ::a.b.c.d (the deprecated compatible form), but not :: and ::1 themselves
  if (zeros(0, 12) && !zeros(12, 15)) return tail();
  // 64:ff9b::a.b.c.d and 64:ff9b:1::/48 (NAT64)
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b) return tail();
  // 2002:aabb:ccdd::/48 (6to4)
  if (b[0] === 0x20 && b[1] === 0x02) return { family: 4, bytes: b.slice(2, 6) };
  return undefined;
}

const CLASSES: ReadonlyArray<[string, AddressClass]> = [
  ['0.0.0.0/8', 'unspecified'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'shared'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'reserved'],
  ['192.0.2.0/24', 'documentation'],
  ['192.88.99.0/24', 'reserved'],
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'benchmark'],
  ['198.51.100.0/24', 'documentation'],
  ['203.0.113.0/24', 'documentation'],
  ['224.0.0.0/4', 'multicast'],
  ['255.255.255.255/32', 'broadcast'],
  ['240.0.0.0/4', 'reserved'],
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['100::/64', 'reserved'],
  ['2001:db8::/32', 'documentation'],
  ['2001::/23', 'reserved'],
  ['fc00::/7', 'private'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'private'],
  ['ff00::/8', 'multicast'],
];
const CLASS_RANGES = CLASSES.map(([r, c]) => [parseRange(r)!, c] as const);

/**
 * The class of an address: the first refused range it falls in, or `'public'`. IPv4-carrying IPv6
 * addresses are classed by the IPv4 address they carry.
 */
export function classifyAddress(ip: IpAddress): AddressClass {
  const v4 = embeddedIpv4(ip);
  const judged = v4 ?? ip;
  for (const [range, cls] of CLASS_RANGES) {
    if (range.family === judged.family && inRange(judged, range)) return cls;
  }
  return 'public';
}

/** The canonical text of an address (dotted quad, or eight lowercase groups joined by `:`). */
export function formatIp(ip: IpAddress): string {
  if (ip.family === 4) return Array.from(ip.bytes).join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((ip.bytes[i]! << 8) | ip.bytes[i + 1]!).toString(16));
  return groups.join(':');
}

/** True when two addresses are the same (an IPv4-carrying IPv6 address equals its IPv4 form). */
export function sameAddress(a: IpAddress, b: IpAddress): boolean {
  const x = a.family === 6 ? (embeddedIpv4(a) ?? a) : a;
  const y = b.family === 6 ? (embeddedIpv4(b) ?? b) : b;
  return x.family === y.family && x.bytes.every((v, i) => v === y.bytes[i]);
}
