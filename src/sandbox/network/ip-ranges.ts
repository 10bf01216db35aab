/**
 * IP addresses as the egress policy sees them: recognised by the platform's parser (`net.isIP`:
 * dotted quads without leading zeros, IPv6 with `::` and an embedded IPv4 tail), matched against
 * CIDR ranges by `net.BlockList`, and sorted into the classes a sandbox may not reach on its own.
 * Pure: no name is resolved here.
 *
 * An IPv6 address that carries an IPv4 one (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64
 * `64:ff9b::a.b.c.d`, 6to4 `2002:aabb:ccdd::`) is judged as that IPv4 address, so no spelling
 * reaches a refused range. BlockList unwraps only the mapped form, and across families it lets an
 * IPv4 address match an IPv6 rule (`::/0` holds `8.8.8.8`); so every check here unwraps first and
 * asks a BlockList only about addresses of its own rules' family.
 */
import { BlockList, isIPv4, isIPv6 } from 'node:net';

/** One address, as canonical text: a dotted quad, or lowercase IPv6 hex with the longest zero run as `::`. */
export interface IpAddress {
  family: 4 | 6;
  address: string;
}

/** A CIDR range (`10.0.0.0/8`, `fc00::/7`); a bare address is a range of one. */
export interface IpRange extends IpAddress {
  prefix: number;
  /** This one range, to be asked only about addresses of `family`. */
  blockList: BlockList;
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

const FAMILY = { 4: 'ipv4', 6: 'ipv6' } as const;

/**
 * Parse `a.b.c.d` or an IPv6 address, either one optionally in brackets; `undefined` when it is
 * neither. An IPv6 zone (`%eth0`) is dropped: it names an interface, not an address.
 */
export function parseIp(text: string): IpAddress | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  if (isIPv4(bare)) return { family: 4, address: bare };
  const v6 = bare.replace(/%[^%]*$/, '');
  if (v6.includes('%') || !isIPv6(v6)) return undefined;
  // The URL parser writes an IPv6 host in canonical form, all in hex (no dotted tail).
  return { family: 6, address: new URL(`http://[${v6}]`).hostname.slice(1, -1) };
}

/** Parse `address/prefix` or a bare address; `undefined` when malformed. */
export function parseRange(text: string): IpRange | undefined {
  const slash = text.indexOf('/');
  const ip = parseIp(slash < 0 ? text : text.slice(0, slash));
  if (!ip) return undefined;
  const max = ip.family === 4 ? 32 : 128;
  const digits = slash < 0 ? String(max) : text.slice(slash + 1);
  if (!/^[0-9]{1,3}$/.test(digits) || Number(digits) > max) return undefined;
  const blockList = new BlockList();
  blockList.addSubnet(ip.address, Number(digits), FAMILY[ip.family]);
  return { ...ip, prefix: Number(digits), blockList };
}

/**
 * True when `ip` lies in `range`. An IPv6 address is compared with an IPv4 range as the IPv4
 * address it carries; an IPv4 address never lies in an IPv6 range.
 */
export function inRange(ip: IpAddress, range: IpRange): boolean {
  const a = ip.family === range.family ? ip : embeddedIpv4(ip);
  return a?.family === range.family && range.blockList.check(a.address, FAMILY[a.family]);
}

function subnetList(family: 4 | 6, ranges: readonly string[]): BlockList {
  const list = new BlockList();
  for (const r of ranges) {
    const [address, prefix] = r.split('/');
    list.addSubnet(address!, Number(prefix), FAMILY[family]);
  }
  return list;
}

/** The ranges whose last 32 bits are an IPv4 address: mapped, compatible and NAT64 (both prefixes). */
const LAST_32_CARRIERS = subnetList(6, ['::ffff:0:0/96', '::/96', '64:ff9b::/32']);
/** `::` to `::ff` (with `::` and `::1`) are IPv6 addresses, not the compatible form of `0.0.0.x`. */
const NOT_COMPATIBLE = subnetList(6, ['::/120']);
/** 6to4: the IPv4 address is the 32 bits after the first 16. */
const SIX_TO_FOUR = subnetList(6, ['2002::/16']);

/** The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4), if any. */
export function embeddedIpv4(ip: IpAddress): IpAddress | undefined {
  if (ip.family !== 6) return undefined;
  let at: number;
  if (SIX_TO_FOUR.check(ip.address, 'ipv6')) at = 1;
  else if (LAST_32_CARRIERS.check(ip.address, 'ipv6') && !NOT_COMPATIBLE.check(ip.address, 'ipv6')) at = 6;
  else return undefined;
  const g = groups(ip.address);
  return { family: 4, address: [g[at]! >> 8, g[at]! & 0xff, g[at + 1]! >> 8, g[at + 1]! & 0xff].join('.') };
}

/** The eight 16-bit groups of a canonical IPv6 text (hex only, at most one `::`). */
function groups(canonical: string): number[] {
  const [head = [], tail] = canonical.split('::').map((half) => (half === '' ? [] : half.split(':').map((h) => parseInt(h, 16))));
  return tail === undefined ? head : [...head, ...Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

/** Each class with its ranges; broadcast comes before reserved, which holds it. */
const CLASSES: ReadonlyArray<[Exclude<AddressClass, 'public'>, readonly string[], readonly string[]]> = [
  ['unspecified', ['0.0.0.0/8'], ['::/128']],
  ['loopback', ['127.0.0.0/8'], ['::1/128']],
  ['link-local', ['169.254.0.0/16'], ['fe80::/10']],
  ['private', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'], ['fc00::/7', 'fec0::/10']],
  ['shared', ['100.64.0.0/10'], []],
  ['multicast', ['224.0.0.0/4'], ['ff00::/8']],
  ['broadcast', ['255.255.255.255/32'], []],
  ['reserved', ['192.0.0.0/24', '192.88.99.0/24', '240.0.0.0/4'], ['100::/64', '2001::/23']],
  ['documentation', ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24'], ['2001:db8::/32']],
  ['benchmark', ['198.18.0.0/15'], []],
];
const CLASS_LISTS = {
  4: CLASSES.map(([cls, v4]) => [cls, subnetList(4, v4)] as const),
  6: CLASSES.map(([cls, , v6]) => [cls, subnetList(6, v6)] as const),
};

/**
 * The class of an address: the first refused range it falls in, or `'public'`. IPv4-carrying IPv6
 * addresses are classed by the IPv4 address they carry.
 */
export function classifyAddress(ip: IpAddress): AddressClass {
  const judged = embeddedIpv4(ip) ?? ip;
  return CLASS_LISTS[judged.family].find(([, list]) => list.check(judged.address, FAMILY[judged.family]))?.[0] ?? 'public';
}

/** True when two addresses are the same (an IPv4-carrying IPv6 address equals its IPv4 form). */
export function sameAddress(a: IpAddress, b: IpAddress): boolean {
  const x = embeddedIpv4(a) ?? a;
  const y = embeddedIpv4(b) ?? b;
  return x.family === y.family && x.address === y.address;
}
