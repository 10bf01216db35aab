// Pins what the executor does when a file changed between the scan and the action: a pull keeps
// an edit made after the scan (left for the next sync when the store did not change, copied out
// first when it did), a local delete removes only the bytes the plan saw, a remote delete is sent
// only while the file is still gone, an upload sends only the bytes the plan named, and a pull
// the folder cannot hold is reported once per listed version.
import { describe, expect, it } from 'vitest';
import {
  isNewBlockedPull,
  localDeleteVerdict,
  pullRaceVerdict,
  remoteDeleteVerdict,
  uploadVerdict,
  type LocalDeleteRace,
  type PullRace,
} from '../../../src/memory/rules/race-rules.js';

const BASE = 'a'.repeat(64);
const STORE = 'b'.repeat(64);
const EDIT = 'c'.repeat(64);

describe('pullRaceVerdict', () => {
  const race = (over: Partial<PullRace>): PullRace => ({
    plannedConflict: false,
    fileThere: true,
    baseSha: BASE,
    fetchedSha: STORE,
    storeSha: STORE,
    ...over,
  });
  const rows: Array<{ description: string; race: PullRace; expected: ReturnType<typeof pullRaceVerdict>['action'] }> = [
    { description: 'no file at the path: the store version is written', race: race({ fileThere: false }), expected: 'write' },
    {
      description: 'a planned conflict with no file left: written, nothing to copy',
      race: race({ fileThere: false, plannedConflict: true }),
      expected: 'write',
    },
    {
      description: 'a planned conflict copies the local bytes out first',
      race: race({ plannedConflict: true }),
      expected: 'copy-then-write',
    },
    { description: 'a file unchanged since the scan is overwritten', race: race({}), expected: 'write' },
    { description: 'a file changed back to the baseline is overwritten', race: race({ changed: { sha: BASE } }), expected: 'write' },
    {
      description: 'a file changed to the store version already is overwritten',
      race: race({ changed: { sha: STORE } }),
      expected: 'write',
    },
    {
      description: 'a file no longer readable as a regular file is overwritten',
      race: race({ changed: { sha: undefined } }),
      expected: 'write',
    },
    {
      description: 'an edit after the scan while the store changed: copied out, the store wins',
      race: race({ changed: { sha: EDIT } }),
      expected: 'copy-then-write',
    },
    {
      description: 'an edit after the scan while the store still holds the baseline: the edit is kept',
      race: race({ changed: { sha: EDIT }, storeSha: BASE, fetchedSha: BASE }),
      expected: 'keep-local',
    },
    {
      description: 'an edit after the scan of a file new on both sides: copied out, the store wins',
      race: race({ changed: { sha: EDIT }, baseSha: undefined }),
      expected: 'copy-then-write',
    },
  ];
  it.each(rows)('$description', ({ race: r, expected }) => {
    expect(pullRaceVerdict(r).action).toBe(expected);
  });

  it('a kept edit is a transient outcome, so the next sync uploads it', () => {
    expect(pullRaceVerdict(race({ changed: { sha: EDIT }, storeSha: BASE, fetchedSha: BASE }))).toEqual({
      action: 'keep-local',
      outcome: { ok: false, failure: 'transient', reason: 'file changed during the download' },
    });
  });
});

describe('localDeleteVerdict', () => {
  const rows: Array<{ description: string; race: LocalDeleteRace; expected: ReturnType<typeof localDeleteVerdict> }> = [
    { description: 'a file as scanned is removed', race: { current: 'file', expectedSha: BASE }, expected: { action: 'remove' } },
    {
      description: 'a file touched but holding the same bytes is removed',
      race: { current: 'file', changed: { sha: BASE }, expectedSha: BASE },
      expected: { action: 'remove' },
    },
    {
      description: 'a file edited since the scan is kept',
      race: { current: 'file', changed: { sha: EDIT }, expectedSha: BASE },
      expected: { action: 'done', outcome: { ok: false, failure: 'precondition', reason: 'file changed since the scan' } },
    },
    {
      description: 'a file that can no longer be read is kept',
      race: { current: 'file', changed: { sha: undefined }, expectedSha: BASE },
      expected: { action: 'done', outcome: { ok: false, failure: 'precondition', reason: 'file changed since the scan' } },
    },
    {
      description: 'a file already gone is done',
      race: { current: 'none', expectedSha: BASE },
      expected: { action: 'done', outcome: { ok: true } },
    },
    {
      description: 'a folder or symlink at the path is left alone',
      race: { current: 'not-a-file', expectedSha: BASE },
      expected: { action: 'done', outcome: { ok: false, failure: 'precondition', reason: 'no longer a regular file' } },
    },
  ];
  it.each(rows)('$description', ({ race, expected }) => {
    expect(localDeleteVerdict(race)).toEqual(expected);
  });
});

describe('remoteDeleteVerdict', () => {
  const keep = { action: 'keep', outcome: { ok: false, failure: 'precondition', reason: 'the file is there again' } };
  const rows: Array<{ description: string; now: Parameters<typeof remoteDeleteVerdict>[0]; expected: unknown }> = [
    { description: 'a file still gone: the delete is sent', now: 'missing', expected: { action: 'send' } },
    { description: 'a folder at the path is not the memory file: the delete is sent', now: 'folder', expected: { action: 'send' } },
    { description: 'a file back at the path keeps the memory', now: 'other', expected: keep },
    { description: 'a path that cannot be checked keeps the memory', now: 'unknown', expected: keep },
  ];
  it.each(rows)('$description', ({ now, expected }) => {
    expect(remoteDeleteVerdict(now)).toEqual(expected);
  });
});

describe('uploadVerdict', () => {
  const rows = [
    { description: 'the bytes the plan named are sent', read: EDIT, planned: EDIT, expected: { action: 'send' } },
    {
      description: 'a file changed since the scan waits for the next sync',
      read: STORE,
      planned: EDIT,
      expected: { action: 'skip', outcome: { ok: false, failure: 'transient', reason: 'file changed since the scan' } },
    },
  ];
  it.each(rows)('$description', ({ read, planned, expected }) => {
    expect(uploadVerdict(read, planned)).toEqual(expected);
  });
});

describe('isNewBlockedPull', () => {
  const rows = [
    { description: 'a first block is reported', blocked: undefined, sha: STORE, expected: true },
    { description: 'the same listed version again is not', blocked: { 'a/b.md': STORE }, sha: STORE, expected: false },
    { description: 'a newer listed version is reported again', blocked: { 'a/b.md': BASE }, sha: STORE, expected: true },
  ];
  it.each(rows)('$description', ({ blocked, sha, expected }) => {
    expect(isNewBlockedPull(blocked, 'a/b.md', sha)).toBe(expected);
  });
});
