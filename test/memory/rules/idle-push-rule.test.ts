// Pins what a sync loop does when its session goes idle: push at once, after the running sync, or
// nothing (closed, a tool call still running, a push already waiting).
import { describe, expect, it } from 'vitest';
import { idlePushDecision, type IdleFacts, type IdlePushDecision } from '../../../src/memory/rules/idle-push-rule.js';

const calm: IdleFacts = { closed: false, toolCallsInFlight: 0, syncRunning: false, pushQueued: false };

const rows: Array<{ description: string; facts: Partial<IdleFacts>; expected: IdlePushDecision }> = [
  { description: 'nothing runs: push now', facts: {}, expected: 'push-now' },
  { description: 'a sync runs: push after it', facts: { syncRunning: true }, expected: 'push-after-running' },
  {
    description: 'a push already waits for the running sync: nothing more',
    facts: { syncRunning: true, pushQueued: true },
    expected: 'none',
  },
  { description: 'a tool call runs (another thread): nothing', facts: { toolCallsInFlight: 1 }, expected: 'none' },
  { description: 'a tool call runs beside a sync: nothing', facts: { toolCallsInFlight: 2, syncRunning: true }, expected: 'none' },
  { description: 'closed (the finish uploads): nothing', facts: { closed: true }, expected: 'none' },
  { description: 'closed while a sync runs: nothing', facts: { closed: true, syncRunning: true }, expected: 'none' },
];

describe('idlePushDecision', () => {
  it.each(rows)('$description', ({ facts, expected }) => {
    expect(idlePushDecision({ ...calm, ...facts })).toBe(expected);
  });
});
