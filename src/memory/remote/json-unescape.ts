/**
 * Decodes the inside of a JSON string token (the bytes between its quotes, UTF-8) to the UTF-8
 * bytes of the string it stands for, in place: what is written never passes what is read (an
 * escape is never shorter than what it stands for), so the decoded bytes end where the returned
 * length says, from the same start. No JavaScript string is made.
 *
 * Rules, as `JSON.parse` then a UTF-8 encoding gives them:
 * - `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t` and `\uXXXX` (any case of hex digit) are the
 *   only escapes; anything else after a backslash, or a `\u` without four hex digits, throws a
 *   `SyntaxError`;
 * - a `\uXXXX` high surrogate followed by a `\uXXXX` low one is one character (4 bytes); a
 *   surrogate that is not part of such a pair becomes U+FFFD, as encoding it to UTF-8 does;
 * - every other byte is copied as it is (the token's UTF-8 is the server's; raw control
 *   characters, which JSON forbids in a string, are kept rather than refused).
 */

const BACKSLASH = 0x5c;

/** The byte each one-letter escape stands for, by the letter's byte (0: not one). */
const SHORT_ESCAPES = new Uint8Array(256);
for (const [letter, byte] of [
  ['"', 0x22],
  ['\\', 0x5c],
  ['/', 0x2f],
  ['b', 0x08],
  ['f', 0x0c],
  ['n', 0x0a],
  ['r', 0x0d],
  ['t', 0x09],
] as const)
  SHORT_ESCAPES[letter.charCodeAt(0)] = byte;

/** Runs between escapes longer than this are copied natively; shorter ones byte by byte. */
const NATIVE_COPY_BYTES = 64;

function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/** The code unit of the `\uXXXX` escape whose `u` is at `at`, or -1 when it is not one within `end`. */
function hexUnit(buf: Buffer, at: number, end: number): number {
  if (at + 5 > end) return -1;
  let unit = 0;
  for (let k = 1; k <= 4; k++) {
    const d = hexDigit(buf[at + k]!);
    if (d < 0) return -1;
    unit = unit * 16 + d;
  }
  return unit;
}

function putCodePoint(buf: Buffer, out: number, cp: number): number {
  if (cp < 0x80) {
    buf[out] = cp;
    return out + 1;
  }
  if (cp < 0x800) {
    buf[out] = 0xc0 | (cp >> 6);
    buf[out + 1] = 0x80 | (cp & 0x3f);
    return out + 2;
  }
  if (cp < 0x10000) {
    buf[out] = 0xe0 | (cp >> 12);
    buf[out + 1] = 0x80 | ((cp >> 6) & 0x3f);
    buf[out + 2] = 0x80 | (cp & 0x3f);
    return out + 3;
  }
  buf[out] = 0xf0 | (cp >> 18);
  buf[out + 1] = 0x80 | ((cp >> 12) & 0x3f);
  buf[out + 2] = 0x80 | ((cp >> 6) & 0x3f);
  buf[out + 3] = 0x80 | (cp & 0x3f);
  return out + 4;
}

/** Decode `buf[start, end)` in place as described above; returns the decoded length. */
export function unescapeJsonInPlace(buf: Buffer, start: number, end: number): number {
  let read = start;
  let out = start;
  // Searched within the token only, not on to the end of the page.
  const token = buf.subarray(start, end);
  for (;;) {
    const bs = token.indexOf(BACKSLASH, read - start);
    const runEnd = bs < 0 ? end : start + bs;
    const run = runEnd - read;
    if (out !== read && run > 0) {
      if (run > NATIVE_COPY_BYTES) buf.copy(buf, out, read, runEnd);
      else for (let k = 0; k < run; k++) buf[out + k] = buf[read + k]!;
    }
    out += run;
    read = runEnd;
    if (read >= end) return out - start;
    // An escape at `read`.
    if (read + 1 >= end) throw new SyntaxError('a JSON string ends in the middle of an escape');
    const c = buf[read + 1]!;
    const short = SHORT_ESCAPES[c]!;
    if (short !== 0) {
      buf[out++] = short;
      read += 2;
      continue;
    }
    switch (c) {
      case 0x75 /* u */: {
        const unit = hexUnit(buf, read + 1, end);
        if (unit < 0) throw new SyntaxError('a JSON string has a \\u escape without four hex digits');
        read += 6;
        let cp = unit;
        if (unit >= 0xd800 && unit <= 0xdbff) {
          // A high surrogate: one character with the low one that follows, else U+FFFD.
          const low = read + 1 < end && buf[read] === BACKSLASH && buf[read + 1] === 0x75 ? hexUnit(buf, read + 1, end) : -1;
          if (low >= 0xdc00 && low <= 0xdfff) {
            cp = 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00);
            read += 6;
          } else {
            cp = 0xfffd;
          }
        } else if (unit >= 0xdc00 && unit <= 0xdfff) {
          cp = 0xfffd;
        }
        out = putCodePoint(buf, out, cp);
        break;
      }
      default:
        throw new SyntaxError(`a JSON string has an unknown escape \\${String.fromCharCode(c)}`);
    }
  }
}
