// Pins the path rules of the memory sync: which server paths become store-relative local paths
// and which are refused (and why), which mount paths are accepted, that the marker path and our
// temp-file prefix are reserved both ways, and how case-fold collisions are resolved
// deterministically.
import { describe, expect, it } from 'vitest';
import {
  MAX_PATH_BYTES,
  MAX_SEGMENT_BYTES,
  TEMP_FILE_PREFIX,
  checkMountPath,
  checkRelPath,
  foldCase,
  groupCaseCollisions,
  isReservedRelPath,
  isTempFileName,
  relToRemotePath,
  remotePathToRel,
} from '../../../src/memory/rules/paths.js';
import { MARKER_FILE_NAME } from '../../../src/memory/rules/marker.js';
import { memoryPathProblem } from '../../../src/testing/emulator/model/memory-paths.js';

describe('remotePathToRel', () => {
  const accepted = [
    { description: 'strips the leading slash', input: '/notes/todo.md', rel: 'notes/todo.md' },
    { description: 'strips several leading slashes', input: '///a.md', rel: 'a.md' },
    { description: 'keeps a root-level file', input: '/a', rel: 'a' },
    { description: 'keeps non-ASCII names', input: '/notizen/über.md', rel: 'notizen/über.md' },
    { description: 'keeps a dot file that is not reserved', input: '/.profile', rel: '.profile' },
    { description: 'keeps a name with dots inside', input: '/a..b/c...d', rel: 'a..b/c...d' },
    { description: 'keeps the marker name below the root', input: `/sub/${MARKER_FILE_NAME}`, rel: `sub/${MARKER_FILE_NAME}` },
    { description: 'keeps a 255-byte segment', input: `/${'x'.repeat(MAX_SEGMENT_BYTES)}`, rel: 'x'.repeat(MAX_SEGMENT_BYTES) },
    { description: 'keeps 20 segments', input: `/${Array(20).fill('d').join('/')}`, rel: Array(20).fill('d').join('/') },
  ];
  for (const row of accepted) {
    it(`accepts: ${row.description}`, () => expect(remotePathToRel(row.input)).toEqual({ ok: true, rel: row.rel }));
  }

  const longPath = `/${Array(9).fill('y'.repeat(120)).join('/')}`; // 9 × 121 = 1089 bytes
  const refused = [
    { description: 'a ".." segment', input: '/notes/../../etc/passwd', reason: '".." segment' },
    { description: 'a leading ".." segment', input: '/../x', reason: '".." segment' },
    { description: 'a "." segment', input: '/notes/./a.md', reason: '"." segment' },
    { description: 'an empty segment', input: '/notes//a.md', reason: 'empty segment' },
    { description: 'a trailing slash', input: '/notes/', reason: 'empty segment' },
    { description: 'the bare root', input: '/', reason: 'names no file' },
    { description: 'an empty string', input: '', reason: 'names no file' },
    { description: 'a NUL character', input: '/a\u0000b', reason: 'NUL' },
    { description: 'a backslash', input: '/a\\..\\b', reason: 'backslash' },
    { description: 'a newline', input: '/a\nb', reason: 'U+000A' },
    { description: 'a DEL', input: '/a\u007fb', reason: 'U+007F' },
    { description: 'a C1 control', input: '/a\u0085b', reason: 'U+0085' },
    { description: 'a line separator', input: '/a\u2028b', reason: 'U+2028' },
    { description: 'a right-to-left override', input: '/invoice-\u202Egpj.exe', reason: 'format character U+202E' },
    { description: 'a zero-width joiner', input: '/a\u200Db.md', reason: 'format character U+200D' },
    { description: 'a byte-order mark', input: '/\uFEFFnotes.md', reason: 'format character U+FEFF' },
    { description: 'a decomposed (NFD) name', input: '/cafe\u0301.md', reason: 'not in Unicode NFC' },
    { description: 'a segment over 255 bytes', input: `/${'x'.repeat(MAX_SEGMENT_BYTES + 1)}`, reason: '256-byte name' },
    { description: 'a segment over 255 bytes counted in UTF-8', input: `/${'é'.repeat(128)}`, reason: '256-byte name' },
    { description: `a path over ${MAX_PATH_BYTES} bytes`, input: longPath, reason: `at most ${MAX_PATH_BYTES}` },
    { description: 'more than 20 segments', input: `/${Array(21).fill('d').join('/')}`, reason: '21 segments' },
    { description: 'the marker path', input: `/${MARKER_FILE_NAME}`, reason: 'marker' },
    { description: 'the marker path with extra leading slashes', input: `//${MARKER_FILE_NAME}`, reason: 'marker' },
    { description: 'a temp-file name at the root', input: `/${TEMP_FILE_PREFIX}123`, reason: 'temp-file prefix' },
    { description: 'a temp-file name in a folder', input: `/a/${TEMP_FILE_PREFIX}x.md`, reason: 'temp-file prefix' },
    { description: 'a temp-file prefix as a folder name', input: `/${TEMP_FILE_PREFIX}d/x.md`, reason: 'temp-file prefix' },
  ];
  for (const row of refused) {
    it(`refuses ${row.description}, saying why`, () => {
      const result = remotePathToRel(row.input);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.reason).toContain(row.reason);
    });
  }

  it('round-trips through relToRemotePath', () => {
    expect(relToRemotePath('notes/todo.md')).toBe('/notes/todo.md');
    expect(remotePathToRel(relToRemotePath('notes/todo.md'))).toEqual({ ok: true, rel: 'notes/todo.md' });
  });
});

describe('checkRelPath (local side)', () => {
  const rows = [
    { description: 'accepts a nested path', input: 'a/b/c.md', ok: true },
    { description: 'refuses an absolute path', input: '/a.md', ok: false },
    { description: 'refuses the marker (never uploaded)', input: MARKER_FILE_NAME, ok: false },
    { description: 'refuses our temp files (never uploaded)', input: `dir/${TEMP_FILE_PREFIX}abc`, ok: false },
    { description: 'refuses an empty path', input: '', ok: false },
    { description: 'refuses a path escaping the root', input: 'a/../../b', ok: false },
    { description: 'refuses a local name with a format character (the API would)', input: 'a\u202Eb.md', ok: false },
    { description: 'refuses a local name not in NFC (the API would)', input: 'cafe\u0301.md', ok: false },
    { description: 'accepts a composed (NFC) accented name', input: 'caf\u00e9.md', ok: true },
  ];
  for (const row of rows) {
    it(row.description, () => expect(checkRelPath(row.input).ok).toBe(row.ok));
  }
});

describe('agreement with the emulator (which enforces the API rules)', () => {
  const samples = [
    '/ok.md',
    '/a\u202Eb.md',
    '/a\u200Bb.md',
    '/\uFEFFx',
    '/cafe\u0301.md',
    '/caf\u00e9.md',
    '/a\u0007b',
    '/a\u2029b',
    '/a/../b',
    '/a//b',
    `/${Array(21).fill('d').join('/')}`,
    '/x\u00ADy.md',
  ];
  for (const sample of samples) {
    it(`${JSON.stringify(sample)}: refused here exactly when the emulator refuses it`, () => {
      expect(remotePathToRel(sample).ok).toBe(memoryPathProblem(sample) === null);
    });
  }
});

describe('reserved names', () => {
  const rows = [
    { description: 'the marker at the root is reserved', rel: MARKER_FILE_NAME, reserved: true },
    { description: 'a marker-named file below the root is not reserved', rel: `a/${MARKER_FILE_NAME}`, reserved: false },
    { description: 'a temp file at any depth is reserved', rel: `a/b/${TEMP_FILE_PREFIX}1`, reserved: true },
    { description: 'a name merely containing the prefix is not reserved', rel: `a/x${TEMP_FILE_PREFIX}1`, reserved: false },
    { description: 'an ordinary file is not reserved', rel: 'notes.md', reserved: false },
  ];
  for (const row of rows) {
    it(row.description, () => expect(isReservedRelPath(row.rel)).toBe(row.reserved));
  }

  it('recognises temp file names by their prefix', () => {
    expect(isTempFileName(`${TEMP_FILE_PREFIX}abc`)).toBe(true);
    expect(isTempFileName('abc.md')).toBe(false);
  });
});

describe('checkMountPath', () => {
  const rows = [
    { description: 'accepts a clean absolute path', input: '/mnt/memory/user-preferences', ok: true, reason: '' },
    { description: 'accepts a one-segment path', input: '/mem', ok: true, reason: '' },
    { description: 'refuses a relative path', input: 'mnt/memory/x', ok: false, reason: 'not absolute' },
    { description: 'refuses an empty path', input: '', ok: false, reason: 'empty' },
    { description: 'refuses the filesystem root', input: '/', ok: false, reason: 'root' },
    { description: 'refuses a ".." segment', input: '/mnt/memory/../etc', ok: false, reason: '".."' },
    { description: 'refuses a "." segment', input: '/mnt/./memory', ok: false, reason: '"."' },
    { description: 'refuses an empty segment', input: '/mnt//memory', ok: false, reason: 'empty segment' },
    { description: 'refuses a trailing slash', input: '/mnt/memory/', ok: false, reason: 'empty segment' },
    { description: 'refuses a NUL', input: '/mnt/mem\u0000ory', ok: false, reason: 'U+0000' },
    { description: 'refuses a control character', input: '/mnt/mem\tory', ok: false, reason: 'U+0009' },
    { description: 'refuses a backslash', input: '/mnt/mem\\ory', ok: false, reason: 'backslash' },
    { description: 'refuses an over-long segment', input: `/mnt/${'m'.repeat(256)}`, ok: false, reason: '255 bytes' },
  ];
  for (const row of rows) {
    it(row.description, () => {
      const result = checkMountPath(row.input);
      expect(result.ok).toBe(row.ok);
      if (!result.ok) expect(result.reason).toContain(row.reason);
    });
  }
});

describe('groupCaseCollisions', () => {
  it('keeps the first in code-unit order and shadows the other, with a reason naming both', () => {
    const { kept, shadowed } = groupCaseCollisions(['a.md', 'A.md']);
    expect(kept).toEqual(['A.md']);
    expect(shadowed).toHaveLength(1);
    expect(shadowed[0]?.path).toBe('a.md');
    expect(shadowed[0]?.keptPath).toBe('A.md');
    expect(shadowed[0]?.reason).toContain('"a.md"');
    expect(shadowed[0]?.reason).toContain('"A.md"');
  });

  it('gives the same answer whatever the input order', () => {
    const paths = ['x/B.md', 'x/b.md', 'X/c.md', 'y.md', 'Y.MD', 'z/Q/r.md', 'z/q/R.md'];
    const forward = groupCaseCollisions(paths);
    const backward = groupCaseCollisions([...paths].reverse());
    expect(backward).toEqual(forward);
    expect(forward.kept).toEqual(['X/c.md', 'Y.MD', 'z/Q/r.md']);
    expect(forward.shadowed.map((s) => s.path)).toEqual(['x/B.md', 'x/b.md', 'y.md', 'z/q/R.md']);
  });

  it('shadows a file whose folder differs only by case from a kept folder', () => {
    const { kept, shadowed } = groupCaseCollisions(['Notes/a.md', 'notes/b.md']);
    expect(kept).toEqual(['Notes/a.md']);
    expect(shadowed[0]).toMatchObject({ path: 'notes/b.md', keptPath: 'Notes/a.md' });
  });

  it('keeps files that merely share a correctly spelled folder', () => {
    expect(groupCaseCollisions(['n/a.md', 'n/b.md', 'n/A2.md']).shadowed).toEqual([]);
  });

  it('folds beyond ASCII (ß and SS meet, composed and decomposed é meet)', () => {
    expect(foldCase('STRASSE')).toBe(foldCase('straße'));
    expect(foldCase('caf\u00e9')).toBe(foldCase('cafe\u0301'));
    const { kept, shadowed } = groupCaseCollisions(['caf\u00e9.md', 'CAFE\u0301.md']);
    expect(kept).toHaveLength(1);
    expect(shadowed).toHaveLength(1);
  });

  it('drops exact duplicates silently', () => {
    expect(groupCaseCollisions(['a.md', 'a.md'])).toEqual({ kept: ['a.md'], shadowed: [] });
  });
});
