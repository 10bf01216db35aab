// Pins the reader of raw log lines used by the log style tests: every key of every object with
// its path, and keys repeated within one object (which JSON.parse would hide).
import { describe, expect, it } from 'vitest';
import { duplicateKeys, jsonKeys } from './log-keys.js';

const rows: Array<{ description: string; raw: string; keys: string[]; duplicates: string[] }> = [
  { description: 'a flat line', raw: '{"level":30,"msg":"a \\"quoted\\" {x}"}', keys: ['level', 'msg'], duplicates: [] },
  { description: 'two pids at the top', raw: '{"pid":1,"msg":"x","pid":2}', keys: ['pid', 'msg', 'pid'], duplicates: ['pid'] },
  {
    description: 'nested objects carry their path',
    raw: '{"err":{"type":"E","cause":{"type":"F"}}}',
    keys: ['err', 'err.type', 'err.cause', 'err.cause.type'],
    duplicates: [],
  },
  { description: 'objects of one array are told apart', raw: '{"a":[{"k":1},{"k":2}]}', keys: ['a', 'a.[].k', 'a.[].k'], duplicates: [] },
  { description: 'a repeat inside a nested object', raw: '{"err":{"k":1,"k":2}}', keys: ['err', 'err.k', 'err.k'], duplicates: ['err.k'] },
];

describe('jsonKeys and duplicateKeys', () => {
  for (const row of rows) {
    it(row.description, () => {
      expect(jsonKeys(row.raw).map((k) => (k.path ? `${k.path}.${k.key}` : k.key))).toEqual(row.keys);
      expect(duplicateKeys(row.raw)).toEqual(row.duplicates);
    });
  }
});
