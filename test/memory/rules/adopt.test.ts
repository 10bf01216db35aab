/**
 * Pins what a mount does with what it finds at its path: nothing → create; a real folder with our
 * marker for the same store and a journal entry of the same store whose owner is dead → adopt,
 * unless that entry says the download never finished → clear (removed and downloaded again);
 * everything else → refuse, saying whether it is a recoverable leftover (only one whose owner still
 * runs is).
 */
import { describe, expect, it } from 'vitest';
import { adoptVerdict, type FoundAtPath, type JournalFact } from '../../../src/memory/rules/adopt.js';

const STORE = 'memstore_a';
const ours: FoundAtPath = { kind: 'folder', marker: { kind: 'ours' } };
const dead: JournalFact = { kind: 'entry', storeId: STORE, owner: { alive: false, reason: 'process 9 is gone' } };
const alive: JournalFact = { kind: 'entry', storeId: STORE, owner: { alive: true, reason: 'process 9 still runs' } };
const none: JournalFact = { kind: 'none' };

const rows: Array<{ description: string; found: FoundAtPath; journal: JournalFact; action: string; recoverable?: boolean; says?: RegExp }> =
  [
    { description: 'nothing at the path: create', found: { kind: 'nothing' }, journal: none, action: 'create' },
    { description: 'our folder, same store, dead owner: adopt', found: ours, journal: dead, action: 'adopt', says: /gone/ },
    {
      description: 'our folder, same store, owner alive: refuse as a recoverable leftover in use',
      found: ours,
      journal: alive,
      action: 'refuse',
      recoverable: true,
      says: /still runs/,
    },
    {
      description: 'our folder without a journal entry: refuse, not recoverable',
      found: ours,
      journal: none,
      action: 'refuse',
      recoverable: false,
      says: /no journal entry/,
    },
    {
      description: 'our folder with an unreadable journal entry: refuse, not recoverable',
      found: ours,
      journal: { kind: 'unreadable', error: 'bad json' },
      action: 'refuse',
      recoverable: false,
      says: /unreadable \(bad json\)/,
    },
    {
      description: 'journal entry of another store: refuse',
      found: ours,
      journal: { kind: 'entry', storeId: 'memstore_b', owner: { alive: false, reason: 'gone' } },
      action: 'refuse',
      recoverable: false,
      says: /memstore_b/,
    },
    {
      description: 'a folder of another store (marker names it): refuse, even with a dead journal',
      found: { kind: 'folder', marker: { kind: 'other-store', storeId: 'memstore_b' } },
      journal: dead,
      action: 'refuse',
      recoverable: false,
      says: /another memory store \(memstore_b\)/,
    },
    {
      description: 'a folder without a marker: refuse',
      found: { kind: 'folder', marker: { kind: 'missing' } },
      journal: dead,
      action: 'refuse',
      recoverable: false,
      says: /without the .anthropic-memory-store marker/,
    },
    {
      description: 'an empty folder without a marker, dead journal owner of this store: clear it (crash before the marker)',
      found: { kind: 'folder', marker: { kind: 'missing' }, empty: true },
      journal: dead,
      action: 'clear',
      says: /empty folder/,
    },
    {
      description: 'an empty folder without a marker, owner alive: refuse',
      found: { kind: 'folder', marker: { kind: 'missing' }, empty: true },
      journal: alive,
      action: 'refuse',
      recoverable: false,
    },
    {
      description: 'an empty folder without a marker and no journal entry: refuse',
      found: { kind: 'folder', marker: { kind: 'missing' }, empty: true },
      journal: none,
      action: 'refuse',
      recoverable: false,
    },
    {
      description: 'a folder being removed at its session end (marker maybe gone already), dead owner: clear it',
      found: { kind: 'folder', marker: { kind: 'missing' }, empty: false },
      journal: { ...dead, unmounting: true },
      action: 'clear',
      says: /removing at its session's end/,
    },
    {
      description: 'a folder being removed by a worker that still runs: refuse',
      found: { kind: 'folder', marker: { kind: 'ours' } },
      journal: { ...alive, unmounting: true },
      action: 'refuse',
      recoverable: true,
    },
    {
      description: 'our folder a dead worker was still downloading into: clear it (a file may be half written, none is an edit)',
      found: ours,
      journal: { ...dead, downloading: true },
      action: 'clear',
      says: /still downloading/,
    },
    {
      description: 'our folder a worker that still runs is downloading into: refuse',
      found: ours,
      journal: { ...alive, downloading: true },
      action: 'refuse',
      recoverable: true,
    },
    {
      description: 'a non-empty folder without a marker a dead worker was downloading into: refuse, not ours',
      found: { kind: 'folder', marker: { kind: 'missing' }, empty: false },
      journal: { ...dead, downloading: true },
      action: 'refuse',
      recoverable: false,
    },
    {
      description: 'a folder of another store a dead worker of this store was downloading into: refuse',
      found: { kind: 'folder', marker: { kind: 'other-store', storeId: 'memstore_b' } },
      journal: { ...dead, downloading: true },
      action: 'refuse',
      recoverable: false,
    },
    {
      description: 'a non-empty folder without a marker, dead journal owner: refuse',
      found: { kind: 'folder', marker: { kind: 'missing' }, empty: false },
      journal: dead,
      action: 'refuse',
      recoverable: false,
    },
    {
      description: 'a folder with a malformed marker: refuse',
      found: { kind: 'folder', marker: { kind: 'malformed' } },
      journal: dead,
      action: 'refuse',
      recoverable: false,
      says: /malformed/,
    },
    { description: 'a symlink: refuse', found: { kind: 'symlink' }, journal: dead, action: 'refuse', recoverable: false, says: /symlink/ },
    { description: 'a file: refuse', found: { kind: 'file' }, journal: dead, action: 'refuse', recoverable: false, says: /a file/ },
  ];

describe('adoptVerdict', () => {
  it.each(rows)('$description', ({ found, journal, action, recoverable, says }) => {
    const v = adoptVerdict(STORE, found, journal);
    expect(v.action).toBe(action);
    if (v.action === 'refuse') expect(v.recoverable).toBe(recoverable);
    if (says !== undefined && v.action !== 'create') expect(v.reason).toMatch(says);
  });
});
