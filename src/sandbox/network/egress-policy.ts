/**
 * Where a sandbox's traffic may go, decided without I/O: the egress proxy asks once before it
 * resolves a name ({@link checkHostName}) and once with the addresses the name resolved to
 * ({@link decideEgress}), then dials only an address this returned. Checking the resolved
 * addresses, not the name, is what keeps a name that points at the host, the cloud metadata
 * service or a private network out; dialling the checked address, never resolving again, is what
 * keeps a name whose answer changes in between out.
 *
 * The rules, in order:
 * 1. `limited`: the name must be listed (an exact name, or `*.domain` for any name under it), be
 *    a public package registry when those are allowed, or be the host of one of the agent's MCP
 *    servers when those are allowed. Refused otherwise (`host-not-allowed`), before any lookup.
 * 2. Loopback is refused (`loopback`), and so is any address of the worker's host itself (any
 *    of its interfaces: `host-address`). Nothing lifts these two.
 * 3. Any other address that is not public (link-local with the metadata address, private,
 *    shared/CGNAT, multicast, broadcast, unspecified, documentation, benchmark, reserved) is
 *    refused with its class as the rule, unless `allowPrivate` lifts it: a range there (`10.0.0.0/8`)
 *    lifts it for any address inside, a host name there (`git.internal`, `*.corp.example`) lifts
 *    the private, shared, benchmark, documentation and reserved classes for that name.
 * 4. Everything else (a public address) is allowed.
 *
 * When a name resolves to several addresses, those allowed are dialled in order; the answer is
 * refused when none is.
 */
import { classifyAddress, inRange, parseIp, parseRange, sameAddress, type AddressClass, type IpRange } from './ip-ranges.js';

/** The public package registries `allowPackageManagers` admits (and the hosts their downloads come from). */
export const PACKAGE_REGISTRY_HOSTS: readonly string[] = [
  'registry.npmjs.org',
  'registry.yarnpkg.com',
  'pypi.org',
  'files.pythonhosted.org',
  'crates.io',
  'index.crates.io',
  'static.crates.io',
  'proxy.golang.org',
  'sum.golang.org',
  'rubygems.org',
  'index.rubygems.org',
  'repo.maven.apache.org',
  'repo1.maven.org',
  'api.nuget.org',
  'repo.packagist.org',
];

/** A sandbox's network policy once resolved for one session (its MCP server hosts filled in). */
export type EgressPolicy =
  | { type: 'unrestricted'; allowPrivate: readonly string[] }
  | {
      type: 'limited';
      allowedHosts: readonly string[];
      allowPackageManagers: boolean;
      /** The hosts of the session's MCP servers, when the operator allows them; else empty. */
      mcpServerHosts: readonly string[];
      allowPrivate: readonly string[];
    };

/** Why a connection was refused. */
export type EgressRule = 'host-not-allowed' | 'host-address' | 'bad-target' | Exclude<AddressClass, 'public'>;

export type EgressDecision = { allow: true; addresses: string[] } | { allow: false; rule: EgressRule; address?: string; reason: string };

/** Lower case, without a trailing dot or IPv6 brackets. */
export function normalizeHost(host: string): string {
  const h = host.trim().toLowerCase().replace(/\.$/, '');
  return h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
}

/** True when `host` is `pattern`, or lies under `domain` for a `*.domain` pattern. */
export function hostMatches(pattern: string, host: string): boolean {
  const p = normalizeHost(pattern);
  const h = normalizeHost(host);
  if (p.startsWith('*.')) return h.endsWith(p.slice(1)) && h.length > p.length - 1;
  if (p === h) return true;
  // An IP literal in the list matches any spelling of that address.
  const a = parseIp(p);
  const b = parseIp(h);
  return a !== undefined && b !== undefined && sameAddress(a, b);
}

/** Refusal before any lookup (a malformed target, or a name `limited` does not list); `undefined` to go on. */
export function checkHostName(policy: EgressPolicy, host: string): Extract<EgressDecision, { allow: false }> | undefined {
  const h = normalizeHost(host);
  if (h === '' || h.length > 253 || /[\s/\\@?#\0]/.test(h)) {
    return { allow: false, rule: 'bad-target', reason: `"${host}" is not a host name or address` };
  }
  if (policy.type === 'limited') {
    const listed =
      policy.allowedHosts.some((p) => hostMatches(p, h)) ||
      (policy.allowPackageManagers && PACKAGE_REGISTRY_HOSTS.some((p) => hostMatches(p, h))) ||
      policy.mcpServerHosts.some((p) => hostMatches(p, h));
    if (!listed) {
      return {
        allow: false,
        rule: 'host-not-allowed',
        reason: `${h} is not in the sandbox's allowed hosts (network: limited)`,
      };
    }
  }
  return undefined;
}

const LIFTED_BY_NAME: ReadonlySet<AddressClass> = new Set(['private', 'shared', 'benchmark', 'documentation', 'reserved']);

/**
 * The decision for a connection to `host` (as the client named it) whose lookup gave `resolved`
 * (for an IP literal: the literal itself). `hostAddresses` are the worker host's own interface
 * addresses. Allowed: the addresses to dial, in order, each one checked here.
 */
export function decideEgress(
  policy: EgressPolicy,
  host: string,
  resolved: readonly string[],
  hostAddresses: readonly string[],
): EgressDecision {
  const early = checkHostName(policy, host);
  if (early) return early;
  const name = normalizeHost(host);
  const ranges: IpRange[] = [];
  const names: string[] = [];
  for (const entry of policy.allowPrivate) {
    const range = parseRange(entry);
    if (range) ranges.push(range);
    else names.push(entry);
  }
  const nameLifts = names.some((p) => hostMatches(p, name));
  const own = hostAddresses.map(parseIp).filter((a) => a !== undefined);
  const allowed: string[] = [];
  let firstRefusal: Extract<EgressDecision, { allow: false }> | undefined;
  for (const text of resolved) {
    const refusal = judgeAddress(text, name, { ranges, nameLifts, own });
    if (refusal === undefined) allowed.push(text);
    else firstRefusal ??= refusal;
  }
  if (allowed.length > 0) return { allow: true, addresses: allowed };
  return firstRefusal ?? { allow: false, rule: 'bad-target', reason: `${name} resolved to no address` };
}

function judgeAddress(
  text: string,
  name: string,
  lift: { ranges: IpRange[]; nameLifts: boolean; own: Array<NonNullable<ReturnType<typeof parseIp>>> },
): Extract<EgressDecision, { allow: false }> | undefined {
  const ip = parseIp(text);
  if (!ip) return { allow: false, rule: 'bad-target', address: text, reason: `${name} resolved to "${text}", not an address` };
  const cls = classifyAddress(ip);
  if (cls === 'loopback') {
    return { allow: false, rule: 'loopback', address: text, reason: `${name} is ${text}, the worker host's loopback` };
  }
  if (lift.own.some((o) => sameAddress(o, ip))) {
    return { allow: false, rule: 'host-address', address: text, reason: `${name} is ${text}, an address of the worker's host` };
  }
  if (cls === 'public') return undefined;
  if (cls !== 'unspecified' && lift.ranges.some((r) => inRange(ip, r))) return undefined;
  if (lift.nameLifts && LIFTED_BY_NAME.has(cls)) return undefined;
  return {
    allow: false,
    rule: cls,
    address: text,
    reason: `${name} is ${text}, a ${cls} address${cls === 'link-local' ? ' (the cloud metadata service lives there)' : ''}; the operator can allow it with allowPrivate`,
  };
}
