// Pins the marker format shared with the official worker (`version 1\n<storeId>`, no trailing
// newline) and which bytes count as a valid marker for a store; parseMarker names the store of
// a leftover folder.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MARKER_FILE_NAME, isValidMarker, markerBytes, markerContent, parseMarker } from '../../../src/memory/rules/marker.js';

const enc = (text: string) => new TextEncoder().encode(text);
const STORE = 'memstore_01ABC';

describe('marker content', () => {
  it('is named like the official worker names it', () => {
    expect(MARKER_FILE_NAME).toBe('.anthropic-memory-store');
  });

  it('is "version 1", one newline, the store id, nothing after', () => {
    expect(markerContent(STORE)).toBe(`version 1\n${STORE}`);
    expect(Buffer.from(markerBytes(STORE)).toString('utf8')).toBe(`version 1\n${STORE}`);
  });

  it('hashes like the official worker expects (SHA-256 of the text)', () => {
    const ours = createHash('sha256').update(markerBytes(STORE)).digest('hex');
    const theirs = createHash('sha256').update(`version 1\n${STORE}`, 'utf8').digest('hex');
    expect(ours).toBe(theirs);
  });
});

describe('isValidMarker', () => {
  const rows = [
    { description: 'accepts the exact marker of the store', bytes: enc(`version 1\n${STORE}`), valid: true },
    { description: 'rejects the marker of another store', bytes: enc('version 1\nmemstore_other'), valid: false },
    { description: 'rejects a trailing newline', bytes: enc(`version 1\n${STORE}\n`), valid: false },
    { description: 'rejects a CRLF line break', bytes: enc(`version 1\r\n${STORE}`), valid: false },
    { description: 'rejects another version', bytes: enc(`version 2\n${STORE}`), valid: false },
    { description: 'rejects a UTF-8 BOM', bytes: enc(`\ufeffversion 1\n${STORE}`), valid: false },
    { description: 'rejects an empty file', bytes: new Uint8Array(), valid: false },
    { description: 'rejects a prefix of the marker', bytes: enc(`version 1\n${STORE.slice(0, -1)}`), valid: false },
    { description: 'rejects one changed byte', bytes: enc(`version 1\n${STORE.slice(0, -1)}D`), valid: false },
  ];
  for (const row of rows) {
    it(row.description, () => expect(isValidMarker(row.bytes, STORE)).toBe(row.valid));
  }

  it('never accepts anything for an empty store id', () => {
    expect(isValidMarker(enc('version 1\n'), '')).toBe(false);
  });
});

describe('parseMarker', () => {
  const rows = [
    { description: 'reads the version and store id', bytes: enc(`version 1\n${STORE}`), expected: { version: 1, storeId: STORE } },
    {
      description: 'reads a future version (the caller decides)',
      bytes: enc('version 2\nmemstore_x'),
      expected: { version: 2, storeId: 'memstore_x' },
    },
    { description: 'rejects a trailing newline', bytes: enc(`version 1\n${STORE}\n`), expected: undefined },
    { description: 'rejects a missing id', bytes: enc('version 1\n'), expected: undefined },
    { description: 'rejects an id with spaces', bytes: enc('version 1\nmem store'), expected: undefined },
    { description: 'rejects a version 0 or a leading zero', bytes: enc('version 01\nm'), expected: undefined },
    { description: 'rejects invalid UTF-8', bytes: new Uint8Array([0x76, 0xff, 0x0a, 0x41]), expected: undefined },
    { description: 'rejects an over-long file', bytes: enc(`version 1\n${'m'.repeat(2000)}`), expected: undefined },
    { description: 'rejects free text', bytes: enc('hello'), expected: undefined },
  ];
  for (const row of rows) {
    it(row.description, () => expect(parseMarker(row.bytes)).toEqual(row.expected));
  }
});
