// Pins the folder and marker rule shared by the mounter and the sync: which marker bytes bind a
// folder to its store, and what a sync does with a folder that was removed, emptied, replaced or
// left with a missing, altered or foreign marker (sync, rebuild and download again, or skip).
import { describe, expect, it } from 'vitest';
import { folderVerdict, type FolderFacts, type FolderVerdict } from '../../../src/memory/rules/folder-verdict.js';
import { markerProblemWarning, markerVerdict, type MarkerRead, type MarkerVerdict } from '../../../src/memory/rules/marker.js';
import type { SyncPhase } from '../../../src/memory/rules/plan.js';

const STORE = 'memstore_01abc';
const ROOT = '/mnt/memory/notes';
const bytes = (text: string): MarkerRead => ({ kind: 'bytes', bytes: new TextEncoder().encode(text) });

describe('markerVerdict', () => {
  const rows: Array<{ description: string; read: MarkerRead; expected: MarkerVerdict }> = [
    { description: 'the exact marker of the store is ours', read: bytes(`version 1\n${STORE}`), expected: { kind: 'ours' } },
    {
      description: 'a well-formed marker of another store names that store',
      read: bytes('version 1\nmemstore_other'),
      expected: { kind: 'other-store', storeId: 'memstore_other' },
    },
    { description: 'a trailing newline makes the marker malformed', read: bytes(`version 1\n${STORE}\n`), expected: { kind: 'malformed' } },
    {
      description: 'another format version of the same store is not ours',
      read: bytes(`version 2\n${STORE}`),
      expected: { kind: 'malformed' },
    },
    { description: 'empty bytes are malformed', read: bytes(''), expected: { kind: 'malformed' } },
    { description: 'text that is no marker is malformed', read: bytes('hello'), expected: { kind: 'malformed' } },
    { description: 'no marker file is missing', read: { kind: 'missing' }, expected: { kind: 'missing' } },
    { description: 'a folder or FIFO where the marker goes is not a file', read: { kind: 'not-a-file' }, expected: { kind: 'not-a-file' } },
  ];
  it.each(rows)('$description', ({ read, expected }) => {
    expect(markerVerdict(read, STORE)).toEqual(expected);
  });
});

describe('folderVerdict', () => {
  const ours: MarkerVerdict = { kind: 'ours' };
  const rows: Array<{ description: string; facts: FolderFacts; phase?: SyncPhase; expected: FolderVerdict }> = [
    { description: 'a folder with its marker syncs', facts: { root: 'folder', marker: ours, empty: false }, expected: { action: 'sync' } },
    {
      description: 'an empty folder with its marker syncs (the plan downloads)',
      facts: { root: 'folder', marker: ours, empty: true },
      expected: { action: 'sync' },
    },
    {
      description: 'a removed folder is re-created and downloaded again',
      facts: { root: 'missing' },
      expected: { action: 'rebuild', createRoot: true, warning: 'the store folder was removed; re-created and downloading again' },
    },
    {
      description: 'the flush never re-creates a removed folder',
      facts: { root: 'missing' },
      phase: 'flush',
      expected: { action: 'skip' },
    },
    {
      description: 'the final sync re-creates a removed folder',
      facts: { root: 'missing' },
      phase: 'final',
      expected: { action: 'rebuild', createRoot: true, warning: 'the store folder was removed; re-created and downloading again' },
    },
    {
      description: 'a file or symlink in place of the folder is skipped with a problem',
      facts: { root: 'not-a-folder' },
      expected: { action: 'skip', problem: `${ROOT} is no longer a real folder` },
    },
    {
      description: 'a folder emptied marker included gets its marker back and is downloaded again',
      facts: { root: 'folder', marker: { kind: 'missing' }, empty: true },
      expected: { action: 'rebuild', createRoot: false, warning: 'the store folder was emptied, marker included; downloading again' },
    },
    {
      description: 'the flush skips an emptied folder without a warning',
      facts: { root: 'folder', marker: { kind: 'missing' }, empty: true },
      phase: 'flush',
      expected: { action: 'skip' },
    },
    {
      description: 'an empty folder with an altered marker is rebuilt',
      facts: { root: 'folder', marker: { kind: 'malformed' }, empty: true },
      expected: { action: 'rebuild', createRoot: false, warning: 'the store folder was emptied, marker included; downloading again' },
    },
    {
      description: 'files without a marker are skipped: nothing uploaded or deleted',
      facts: { root: 'folder', marker: { kind: 'missing' }, empty: false },
      expected: { action: 'skip', problem: 'marker .anthropic-memory-store is missing' },
    },
    {
      description: 'files with an altered marker are skipped',
      facts: { root: 'folder', marker: { kind: 'malformed' }, empty: false },
      expected: { action: 'skip', problem: 'marker .anthropic-memory-store is altered' },
    },
    {
      description: "files with another store's marker are skipped as altered",
      facts: { root: 'folder', marker: { kind: 'other-store', storeId: 'memstore_other' }, empty: false },
      expected: { action: 'skip', problem: 'marker .anthropic-memory-store is altered' },
    },
    {
      description: 'a folder where the marker goes is never written over, even in an otherwise empty folder',
      facts: { root: 'folder', marker: { kind: 'not-a-file' }, empty: true },
      expected: { action: 'skip', problem: 'marker .anthropic-memory-store is altered (not a regular file)' },
    },
  ];
  it.each(rows)('$description', ({ facts, phase, expected }) => {
    expect(folderVerdict(facts, ROOT, phase ?? 'sync')).toEqual(expected);
  });

  it('the warning for a skipped folder says nothing is synced and which marker text fixes it', () => {
    expect(markerProblemWarning('marker .anthropic-memory-store is missing', STORE)).toBe(
      `marker .anthropic-memory-store is missing; this folder is not synced (nothing uploaded, nothing deleted) until the marker holds "version 1\\n${STORE}" again`,
    );
  });
});
