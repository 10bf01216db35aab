// Pins the in-place decoder of JSON string tokens against JSON.parse followed by a UTF-8 encoding:
// the same bytes for every escape, surrogate pair and lone surrogate, and a SyntaxError where
// JSON.parse refuses an escape.
import { describe, expect, it } from 'vitest';
import { unescapeJsonInPlace } from '../../../src/memory/remote/json-unescape.js';

/** Decode the inside of `token` (a JSON string token's text) in place, with bytes around it that must stay. */
function decode(token: string): Buffer {
  const inside = Buffer.from(token.slice(1, -1), 'utf8');
  const buf = Buffer.concat([Buffer.from('<<'), inside, Buffer.from('>>')]);
  const n = unescapeJsonInPlace(buf, 2, 2 + inside.length);
  expect(buf.subarray(2 + inside.length).toString()).toBe('>>');
  expect(buf.subarray(0, 2).toString()).toBe('<<');
  return Buffer.from(buf.subarray(2, 2 + n));
}

/** What JSON.parse then a UTF-8 encoding give for `token`. */
function reference(token: string): Buffer {
  return Buffer.from(JSON.parse(token) as string, 'utf8');
}

describe('unescapeJsonInPlace', () => {
  it.each([
    { name: 'no escape', token: '"plain text"' },
    { name: 'every short escape', token: String.raw`"\" \\ \/ \b \f \n \r \t"` },
    { name: 'escapes at both ends', token: String.raw`"\nmiddle\n"` },
    { name: 'only escapes', token: String.raw`"\n\n\n\\\\"` },
    { name: 'a \\u escape per UTF-8 length', token: String.raw`"\u0041 \u00e9 \u20AC \u0000"` },
    { name: 'a surrogate pair', token: String.raw`"\ud834\udd1e clef"` },
    { name: 'a lone high surrogate', token: String.raw`"a\ud834b"` },
    { name: 'a high surrogate then a non-surrogate escape', token: String.raw`"\ud834\u0041"` },
    { name: 'a lone low surrogate', token: String.raw`"\udd1e"` },
    { name: 'two high surrogates', token: String.raw`"\ud834\ud834\udd1e"` },
    { name: 'raw multi-byte characters beside escapes', token: '"é ✓ 𝄞\\n𝄞"' },
    { name: 'a long run between escapes (copied natively)', token: `"${'x'.repeat(5000)}\\n${'y'.repeat(70)}\\t"` },
    { name: 'the empty string', token: '""' },
  ])('gives the bytes JSON.parse gives for $name', ({ token }) => {
    expect(decode(token).equals(reference(token))).toBe(true);
  });

  it('agrees with JSON.parse over random strings of every kind of character', () => {
    const alphabet = [
      'a',
      '"',
      '\\',
      '/',
      '\n',
      '\r',
      '\t',
      '\b',
      '\f',
      '\u0000',
      '\u001f',
      'é',
      '€',
      '𝄞',
      '\ud834',
      '\udd1e',
      'x'.repeat(80),
    ];
    let seed = 11;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 500; round++) {
      const s = Array.from({ length: rand(60) }, () => alphabet[rand(alphabet.length)]).join('');
      // JSON.stringify escapes lone surrogates as \uXXXX and control characters as \uXXXX or short escapes.
      const token = JSON.stringify(s);
      expect(decode(token).equals(reference(token)), token).toBe(true);
    }
  });

  it.each([
    { name: 'an unknown escape', inside: String.raw`a\qb` },
    { name: 'a \\u with three hex digits', inside: String.raw`\u12` },
    { name: 'a \\u with a non-hex digit', inside: String.raw`\u12g4` },
    { name: 'a backslash at the end', inside: 'abc\\' },
  ])('throws a SyntaxError for $name, as JSON.parse does', ({ inside }) => {
    expect(() => JSON.parse(`"${inside}"`)).toThrow(SyntaxError);
    const buf = Buffer.from(inside, 'utf8');
    expect(() => unescapeJsonInPlace(buf, 0, buf.length)).toThrow(SyntaxError);
  });

  it('reads no byte past the token: an escape cut by the end of the range is refused, not completed from what follows', () => {
    const buf = Buffer.from(String.raw`ab\u00` + '41"', 'utf8');
    expect(() => unescapeJsonInPlace(buf, 0, 6)).toThrow(SyntaxError);
    const pair = Buffer.from(String.raw`\ud834\udd1e`, 'utf8');
    // The low half lies past the end: the high one alone is U+FFFD.
    const n = unescapeJsonInPlace(pair, 0, 6);
    expect(pair.subarray(0, n).toString('utf8')).toBe('\ufffd');
  });
});
