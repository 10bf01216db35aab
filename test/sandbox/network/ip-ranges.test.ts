// Addresses as the egress policy sees them: which texts are addresses (brackets and a zone allowed,
// no leading zeros), the class of each at the edges of its ranges, and the rule that an IPv6 address
// carrying an IPv4 one (mapped, compatible, NAT64, 6to4) is judged as that IPv4 address while an
// IPv4 address never lies in an IPv6 range.
import { describe, expect, it } from 'vitest';
import { classifyAddress, embeddedIpv4, inRange, parseIp, parseRange, sameAddress } from '../../../src/sandbox/network/ip-ranges.js';

describe('parseIp and classifyAddress', () => {
  const rows: Array<{ description: string; text: string; cls: string | undefined }> = [
    { description: '0.0.0.0 is unspecified', text: '0.0.0.0', cls: 'unspecified' },
    { description: 'the top of 0.0.0.0/8 is unspecified', text: '0.255.255.255', cls: 'unspecified' },
    { description: ':: is unspecified', text: '::', cls: 'unspecified' },
    { description: 'IPv6 loopback in brackets is loopback', text: '[::1]', cls: 'loopback' },
    { description: 'an IPv4 address in brackets is read too', text: '[127.0.0.1]', cls: 'loopback' },
    { description: 'IPv4-mapped loopback in brackets is loopback', text: '[::ffff:127.0.0.1]', cls: 'loopback' },
    { description: 'IPv4-mapped 10/8 is private', text: '::ffff:10.0.0.1', cls: 'private' },
    { description: 'IPv4-mapped 10/8 in upper-case hex is private', text: '::FFFF:A00:1', cls: 'private' },
    { description: 'IPv4-mapped 0.0.0.0 is unspecified', text: '::ffff:0.0.0.0', cls: 'unspecified' },
    { description: 'IPv4-mapped broadcast is broadcast, not reserved', text: '::ffff:255.255.255.255', cls: 'broadcast' },
    { description: 'the IPv4-compatible form of 10/8 is private', text: '::10.0.0.1', cls: 'private' },
    { description: 'NAT64 of loopback is loopback', text: '64:ff9b::127.0.0.1', cls: 'loopback' },
    { description: 'a NAT64 local-use address is judged by its last 32 bits', text: '64:ff9b:1::a9fe:a9fe', cls: 'link-local' },
    { description: '6to4 of 192.168.1.1 is private', text: '2002:c0a8:101::1', cls: 'private' },
    { description: '6to4 of a public address is public', text: '2002:808:808::1', cls: 'public' },
    { description: 'a link-local address with a zone is link-local', text: 'fe80::1%eth0', cls: 'link-local' },
    { description: 'a zoned link-local address in brackets is link-local', text: '[fe80::1%eth0]', cls: 'link-local' },
    { description: 'broadcast is broadcast', text: '255.255.255.255', cls: 'broadcast' },
    { description: 'the address below broadcast is reserved', text: '255.255.255.254', cls: 'reserved' },
    { description: 'the bottom of 240/4 is reserved', text: '240.0.0.0', cls: 'reserved' },
    { description: 'the address below 127/8 is public', text: '126.255.255.255', cls: 'public' },
    { description: 'the address above 127/8 is public', text: '128.0.0.0', cls: 'public' },
    { description: 'the address below 172.16/12 is public', text: '172.15.255.255', cls: 'public' },
    { description: 'the bottom of 172.16/12 is private', text: '172.16.0.0', cls: 'private' },
    { description: 'the top of 172.16/12 is private', text: '172.31.255.255', cls: 'private' },
    { description: 'the address below 100.64/10 is public', text: '100.63.255.255', cls: 'public' },
    { description: 'the top of 100.64/10 is shared', text: '100.127.255.255', cls: 'shared' },
    { description: 'the address above 100.64/10 is public', text: '100.128.0.0', cls: 'public' },
    { description: 'the top of 198.18/15 is benchmark', text: '198.19.255.255', cls: 'benchmark' },
    { description: 'the address above 198.18/15 is public', text: '198.20.0.0', cls: 'public' },
    { description: 'the address below 224/4 is public', text: '223.255.255.255', cls: 'public' },
    { description: 'the top of 224/4 is multicast', text: '239.255.255.255', cls: 'multicast' },
    { description: 'the address below fc00::/7 is public', text: 'fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', cls: 'public' },
    { description: 'the top of fc00::/7 is private', text: 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', cls: 'private' },
    { description: 'the top of fe80::/10 is link-local', text: 'febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', cls: 'link-local' },
    { description: 'site-local fec0::/10 is private', text: 'fec0::1', cls: 'private' },
    { description: 'the top of 2001::/23 is reserved', text: '2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff', cls: 'reserved' },
    { description: 'the address above 2001::/23 is public', text: '2001:200::', cls: 'public' },
    { description: '2001:db8::/32 is documentation', text: '2001:db8::1', cls: 'documentation' },
    { description: 'the top of 100::/64 is reserved', text: '100::ffff:ffff:ffff:ffff', cls: 'reserved' },
    { description: 'the address above 100::/64 is public', text: '100:0:0:1::', cls: 'public' },
    { description: 'an IPv4 tail before :: is not an address', text: '1.2.3.4::', cls: undefined },
    { description: 'an IPv4 tail with a leading zero is not an address', text: '::ffff:010.0.0.1', cls: undefined },
    { description: 'a :: standing for no group is not an address', text: '1:2:3:4::5:6:7:8', cls: undefined },
    { description: 'an unclosed bracket is not an address', text: '[::1', cls: undefined },
    { description: 'an IPv4 address takes no zone', text: '127.0.0.1%lo', cls: undefined },
    { description: 'two zones are not an address', text: 'fe80::1%a%b', cls: undefined },
    { description: 'empty brackets are not an address', text: '[]', cls: undefined },
  ];
  for (const row of rows) {
    it(row.description, () => {
      const ip = parseIp(row.text);
      expect(ip && classifyAddress(ip)).toBe(row.cls);
    });
  }
});

describe('parseRange', () => {
  const rows: Array<{ description: string; text: string; prefix: number | undefined }> = [
    { description: 'a bare IPv4 address is a /32', text: '10.1.2.3', prefix: 32 },
    { description: 'a bare IPv6 address is a /128', text: '::1', prefix: 128 },
    { description: 'a bracketed IPv6 address takes a prefix', text: '[::1]/128', prefix: 128 },
    { description: '0.0.0.0/0 is the whole IPv4 space', text: '0.0.0.0/0', prefix: 0 },
    { description: '::/0 is the whole IPv6 space', text: '::/0', prefix: 0 },
    { description: 'an IPv4 prefix above 32 is refused', text: '10.0.0.0/33', prefix: undefined },
    { description: 'an IPv6 prefix above 128 is refused', text: '::/129', prefix: undefined },
    { description: 'an empty prefix is refused', text: '10.0.0.0/', prefix: undefined },
    { description: 'a negative prefix is refused', text: '10.0.0.0/-1', prefix: undefined },
    { description: 'two prefixes are refused', text: '10.0.0.0/8/8', prefix: undefined },
    { description: 'a prefix without an address is refused', text: '/8', prefix: undefined },
  ];
  for (const row of rows) {
    it(row.description, () => {
      expect(parseRange(row.text)?.prefix).toBe(row.prefix);
    });
  }
});

describe('inRange', () => {
  const rows: Array<{ description: string; address: string; range: string; inside: boolean }> = [
    { description: 'the top of a range is inside it', address: '10.255.255.255', range: '10.0.0.0/8', inside: true },
    { description: 'the address above a range is outside it', address: '11.0.0.0', range: '10.0.0.0/8', inside: false },
    { description: 'a bare address holds itself', address: '10.1.2.3', range: '10.1.2.3', inside: true },
    { description: 'a bare address holds nothing else', address: '10.1.2.4', range: '10.1.2.3', inside: false },
    { description: 'the host bits of a range are ignored', address: '10.9.9.9', range: '10.1.2.3/8', inside: true },
    { description: '0.0.0.0/0 holds every IPv4 address', address: '203.0.113.9', range: '0.0.0.0/0', inside: true },
    { description: 'an IPv4-mapped address lies in its IPv4 range', address: '::ffff:10.0.0.1', range: '10.0.0.0/8', inside: true },
    { description: 'a NAT64 address lies in its IPv4 range', address: '64:ff9b::a00:1', range: '10.0.0.0/8', inside: true },
    { description: 'a 6to4 address lies in its IPv4 range', address: '2002:a00:1::', range: '10.0.0.0/8', inside: true },
    {
      description: 'an IPv4-mapped address lies in an IPv6 range by its IPv6 form',
      address: '::ffff:10.0.0.1',
      range: '::ffff:0:0/96',
      inside: true,
    },
    { description: 'an IPv4 address never lies in ::/0', address: '8.8.8.8', range: '::/0', inside: false },
    { description: 'an IPv4 address never lies in the mapped range', address: '10.0.0.1', range: '::ffff:0:0/96', inside: false },
    { description: 'a plain IPv6 address never lies in 0.0.0.0/0', address: '2001:db8::1', range: '0.0.0.0/0', inside: false },
    { description: 'a zoned address lies in its range', address: 'fe80::1%eth0', range: 'fe80::/10', inside: true },
  ];
  for (const row of rows) {
    it(row.description, () => {
      expect(inRange(parseIp(row.address)!, parseRange(row.range)!)).toBe(row.inside);
    });
  }
});

describe('sameAddress and embeddedIpv4', () => {
  const rows: Array<{ description: string; a: string; b: string; same: boolean }> = [
    { description: 'an address and its IPv4-mapped form are the same', a: '93.184.215.14', b: '::ffff:93.184.215.14', same: true },
    { description: 'two spellings of one IPv6 address are the same', a: '[2001:4860::1]', b: '2001:4860:0:0:0:0:0:1', same: true },
    { description: 'case and a zone do not make another address', a: 'FE80::1%eth0', b: 'fe80::1', same: true },
    { description: 'an address and its NAT64 form are the same', a: '1.2.3.4', b: '64:ff9b::102:304', same: true },
    { description: 'an address and its 6to4 form are the same', a: '1.2.3.4', b: '2002:102:304::', same: true },
    { description: 'IPv6 loopback is not 127.0.0.1', a: '::1', b: '127.0.0.1', same: false },
    { description: ':: is not 0.0.0.0', a: '::', b: '0.0.0.0', same: false },
    { description: 'neighbouring addresses differ', a: '1.2.3.4', b: '::ffff:1.2.3.5', same: false },
  ];
  for (const row of rows) {
    it(row.description, () => {
      expect(sameAddress(parseIp(row.a)!, parseIp(row.b)!)).toBe(row.same);
    });
  }

  it('an IPv4 address, ::, ::1 and a plain IPv6 address carry no IPv4 address', () => {
    for (const text of ['1.2.3.4', '::', '::1', '2001:4860::1']) expect(embeddedIpv4(parseIp(text)!), text).toBeUndefined();
  });
  it('a 6to4 address carries the 32 bits after its first 16', () => {
    expect(embeddedIpv4(parseIp('2002:102:304:ffff::1')!)).toEqual({ family: 4, address: '1.2.3.4' });
  });
});
