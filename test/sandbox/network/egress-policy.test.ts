// The egress decision, pure: (policy, host name, resolved addresses, the host's own addresses) →
// the addresses to dial, or a refusal naming its rule. Every non-public class is refused unless
// the operator lifts it; loopback and the worker host's own addresses never are; `limited` refuses
// unlisted names before any lookup; an IPv6 spelling of a refused IPv4 address is refused too.
import { describe, expect, it } from 'vitest';
import { checkHostName, decideEgress, hostMatches, type EgressPolicy } from '../../../src/sandbox/network/egress-policy.js';
import { classifyAddress, parseIp } from '../../../src/sandbox/network/ip-ranges.js';

const open: EgressPolicy = { type: 'unrestricted', allowPrivate: [] };
const HOST = ['192.168.1.20', 'fe80::1', '203.0.114.7'];

describe('decideEgress', () => {
  const rows: Array<{ description: string; policy?: EgressPolicy; host: string; resolved: string[]; allow?: string[]; rule?: string }> = [
    { description: 'a public IPv4 address is allowed', host: 'example.com', resolved: ['93.184.215.14'], allow: ['93.184.215.14'] },
    {
      description: 'a public IPv6 address is allowed',
      host: 'example.com',
      resolved: ['2606:2800:21f:cb07::1'],
      allow: ['2606:2800:21f:cb07::1'],
    },
    { description: 'a name resolving to loopback is refused', host: 'evil.example', resolved: ['127.0.0.1'], rule: 'loopback' },
    { description: 'any 127/8 address is loopback', host: 'x', resolved: ['127.3.2.1'], rule: 'loopback' },
    { description: 'IPv6 loopback is refused', host: 'x', resolved: ['::1'], rule: 'loopback' },
    { description: 'IPv4-mapped loopback is refused', host: 'x', resolved: ['::ffff:127.0.0.1'], rule: 'loopback' },
    { description: 'IPv4-mapped loopback in hex is refused', host: 'x', resolved: ['::ffff:7f00:1'], rule: 'loopback' },
    { description: 'NAT64 of the metadata address is refused', host: 'x', resolved: ['64:ff9b::a9fe:a9fe'], rule: 'link-local' },
    { description: '6to4 of a private address is refused', host: 'x', resolved: ['2002:0a00:0001::1'], rule: 'private' },
    {
      description: 'the cloud metadata address is link-local',
      host: 'metadata.google.internal',
      resolved: ['169.254.169.254'],
      rule: 'link-local',
    },
    { description: 'IPv6 link-local is refused', host: 'x', resolved: ['fe80::abcd'], rule: 'link-local' },
    { description: '10/8 is private', host: 'x', resolved: ['10.1.2.3'], rule: 'private' },
    { description: '172.16/12 is private', host: 'x', resolved: ['172.31.255.1'], rule: 'private' },
    { description: '172.32 is public', host: 'x', resolved: ['172.32.0.1'], allow: ['172.32.0.1'] },
    { description: '192.168/16 is private', host: 'x', resolved: ['192.168.0.1'], rule: 'private' },
    { description: 'CGNAT 100.64/10 is shared', host: 'x', resolved: ['100.100.100.200'], rule: 'shared' },
    { description: 'ULA fc00::/7 is private', host: 'x', resolved: ['fd12:3456::1'], rule: 'private' },
    { description: 'multicast is refused', host: 'x', resolved: ['224.0.0.251'], rule: 'multicast' },
    { description: 'IPv6 multicast is refused', host: 'x', resolved: ['ff02::1'], rule: 'multicast' },
    { description: 'the unspecified address is refused', host: 'x', resolved: ['0.0.0.0'], rule: 'unspecified' },
    { description: 'the IPv6 unspecified address is refused', host: 'x', resolved: ['::'], rule: 'unspecified' },
    { description: 'broadcast is refused', host: 'x', resolved: ['255.255.255.255'], rule: 'broadcast' },
    { description: 'the benchmark range is refused', host: 'x', resolved: ['198.18.0.2'], rule: 'benchmark' },
    { description: 'a documentation range is refused', host: 'x', resolved: ['203.0.113.9'], rule: 'documentation' },
    {
      description: "an address of the worker's host is refused, public or not",
      host: 'x',
      resolved: ['203.0.114.7'],
      rule: 'host-address',
    },
    { description: 'a host address in IPv6-mapped form is refused', host: 'x', resolved: ['::ffff:192.168.1.20'], rule: 'host-address' },
    {
      description: 'a mixed answer dials only its public addresses',
      host: 'rebind.example',
      resolved: ['127.0.0.1', '93.184.215.14', '10.0.0.1'],
      allow: ['93.184.215.14'],
    },
    { description: 'an answer with no address is refused', host: 'x', resolved: [], rule: 'bad-target' },
    { description: 'a resolver answer that is not an address is refused', host: 'x', resolved: ['localhost'], rule: 'bad-target' },
    { description: 'a host with a slash is refused before lookup', host: 'a/b', resolved: ['93.184.215.14'], rule: 'bad-target' },
    {
      description: 'allowPrivate with a range lifts a private address inside it',
      policy: { type: 'unrestricted', allowPrivate: ['10.0.0.0/8'] },
      host: 'db',
      resolved: ['10.9.8.7'],
      allow: ['10.9.8.7'],
    },
    {
      description: 'allowPrivate with a range lifts nothing outside it',
      policy: { type: 'unrestricted', allowPrivate: ['10.0.0.0/8'] },
      host: 'db',
      resolved: ['192.168.3.3'],
      rule: 'private',
    },
    {
      description: 'allowPrivate never lifts loopback',
      policy: { type: 'unrestricted', allowPrivate: ['127.0.0.0/8', 'localhost'] },
      host: 'localhost',
      resolved: ['127.0.0.1'],
      rule: 'loopback',
    },
    {
      description: "allowPrivate never lifts the worker host's own address",
      policy: { type: 'unrestricted', allowPrivate: ['192.168.0.0/16'] },
      host: 'x',
      resolved: ['192.168.1.20'],
      rule: 'host-address',
    },
    {
      description: 'allowPrivate with a name lets that name reach a private address',
      policy: { type: 'unrestricted', allowPrivate: ['git.internal'] },
      host: 'GIT.internal.',
      resolved: ['10.0.0.5'],
      allow: ['10.0.0.5'],
    },
    {
      description: 'allowPrivate with a name does not lift link-local (metadata) for it',
      policy: { type: 'unrestricted', allowPrivate: ['git.internal'] },
      host: 'git.internal',
      resolved: ['169.254.169.254'],
      rule: 'link-local',
    },
    {
      description: 'allowPrivate with a name lifts nothing for another name',
      policy: { type: 'unrestricted', allowPrivate: ['git.internal'] },
      host: 'evil.internal',
      resolved: ['10.0.0.5'],
      rule: 'private',
    },
    {
      description: 'limited refuses a name it does not list',
      policy: { type: 'limited', allowedHosts: ['api.example.com'], allowPackageManagers: false, mcpServerHosts: [], allowPrivate: [] },
      host: 'example.org',
      resolved: ['93.184.215.14'],
      rule: 'host-not-allowed',
    },
    {
      description: 'limited allows a listed name',
      policy: { type: 'limited', allowedHosts: ['api.example.com'], allowPackageManagers: false, mcpServerHosts: [], allowPrivate: [] },
      host: 'api.example.com',
      resolved: ['93.184.215.14'],
      allow: ['93.184.215.14'],
    },
    {
      description: 'limited still refuses a listed name that resolves to loopback',
      policy: { type: 'limited', allowedHosts: ['api.example.com'], allowPackageManagers: false, mcpServerHosts: [], allowPrivate: [] },
      host: 'api.example.com',
      resolved: ['127.0.0.1'],
      rule: 'loopback',
    },
    {
      description: 'limited allows a name under a *. pattern',
      policy: { type: 'limited', allowedHosts: ['*.example.com'], allowPackageManagers: false, mcpServerHosts: [], allowPrivate: [] },
      host: 'a.b.example.com',
      resolved: ['93.184.215.14'],
      allow: ['93.184.215.14'],
    },
    {
      description: 'a *. pattern does not match a name that merely ends the same',
      policy: { type: 'limited', allowedHosts: ['*.example.com'], allowPackageManagers: false, mcpServerHosts: [], allowPrivate: [] },
      host: 'evilexample.com',
      resolved: ['93.184.215.14'],
      rule: 'host-not-allowed',
    },
    {
      description: 'limited allows the package registries when asked',
      policy: { type: 'limited', allowedHosts: [], allowPackageManagers: true, mcpServerHosts: [], allowPrivate: [] },
      host: 'registry.npmjs.org',
      resolved: ['104.16.0.35'],
      allow: ['104.16.0.35'],
    },
    {
      description: 'limited refuses the registries when not asked',
      policy: { type: 'limited', allowedHosts: [], allowPackageManagers: false, mcpServerHosts: [], allowPrivate: [] },
      host: 'pypi.org',
      resolved: ['151.101.0.223'],
      rule: 'host-not-allowed',
    },
    {
      description: "limited allows the agent's MCP server hosts it was given",
      policy: { type: 'limited', allowedHosts: [], allowPackageManagers: false, mcpServerHosts: ['mcp.example.net'], allowPrivate: [] },
      host: 'mcp.example.net',
      resolved: ['93.184.215.14'],
      allow: ['93.184.215.14'],
    },
  ];
  for (const row of rows) {
    it(row.description, () => {
      const d = decideEgress(row.policy ?? open, row.host, row.resolved, HOST);
      if (row.allow) expect(d).toEqual({ allow: true, addresses: row.allow });
      else expect(d).toMatchObject({ allow: false, rule: row.rule });
    });
  }

  it('a refusal names the host and the address in its reason', () => {
    const d = decideEgress(open, 'evil.example', ['169.254.169.254'], []);
    expect(d.allow).toBe(false);
    if (!d.allow) expect(d.reason).toMatch(/evil\.example is 169\.254\.169\.254, a link-local address/);
  });
});

describe('checkHostName (before any lookup)', () => {
  it('passes every name under unrestricted', () => {
    expect(checkHostName(open, 'anything.example')).toBeUndefined();
  });
  it('refuses an unlisted name under limited', () => {
    const policy: EgressPolicy = {
      type: 'limited',
      allowedHosts: ['a.example'],
      allowPackageManagers: false,
      mcpServerHosts: [],
      allowPrivate: [],
    };
    expect(checkHostName(policy, 'b.example')).toMatchObject({ rule: 'host-not-allowed' });
    expect(checkHostName(policy, 'A.Example.')).toBeUndefined();
  });
});

describe('hostMatches and the address parser', () => {
  it('an IP literal in a list matches every spelling of it', () => {
    expect(hostMatches('93.184.215.14', '::ffff:93.184.215.14')).toBe(true);
    expect(hostMatches('[2001:4860::1]', '2001:4860:0:0:0:0:0:1')).toBe(true);
  });
  it('rejects octal-looking and malformed quads', () => {
    for (const bad of ['010.0.0.1', '1.2.3', '1.2.3.256', '1::2::3', '12345::', 'fe80::g']) expect(parseIp(bad), bad).toBeUndefined();
    expect(parseIp('fe80::1%eth0')).toBeDefined();
  });
  it('classes a public address as public', () => {
    expect(classifyAddress(parseIp('8.8.8.8')!)).toBe('public');
    expect(classifyAddress(parseIp('2001:4860:4860::8888')!)).toBe('public');
  });
});
