/**
 * Pins the owner verdict of a journal entry: an owner is dead when the machine rebooted since, when
 * its pid is gone, or when the pid now belongs to a process that started at another time; in
 * every other case (including when a fact cannot be read) it counts as alive, so its folder is
 * left alone.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { checkOwner, currentOwner } from '../../../src/memory/journal/owner.js';
import { ownerVerdict, type OwnerIdentity, type OwnerObservation } from '../../../src/memory/rules/owner-verdict.js';

const recorded: OwnerIdentity = { pid: 4242, startTime: '1000', bootId: 'boot-a' };

const rows: Array<{ description: string; recorded: OwnerIdentity; now: OwnerObservation; alive: boolean }> = [
  {
    description: 'same boot, pid there, same start time: alive',
    recorded,
    now: { bootId: 'boot-a', pidExists: true, startTime: '1000' },
    alive: true,
  },
  {
    description: 'the machine rebooted (boot id differs): dead, whatever the pid',
    recorded,
    now: { bootId: 'boot-b', pidExists: true, startTime: '1000' },
    alive: false,
  },
  {
    description: 'no process has the pid: dead',
    recorded,
    now: { bootId: 'boot-a', pidExists: false, startTime: undefined },
    alive: false,
  },
  {
    description: 'the pid was reused (start time differs): dead',
    recorded,
    now: { bootId: 'boot-a', pidExists: true, startTime: '2000' },
    alive: false,
  },
  {
    description: 'boot id unreadable now, pid there: alive',
    recorded,
    now: { bootId: undefined, pidExists: true, startTime: '1000' },
    alive: true,
  },
  {
    description: 'start time unreadable now, pid there: alive (when in doubt, not touched)',
    recorded,
    now: { bootId: 'boot-a', pidExists: true, startTime: undefined },
    alive: true,
  },
  {
    description: 'no start time recorded, pid there: alive',
    recorded: { pid: 4242 },
    now: { bootId: 'boot-a', pidExists: true, startTime: '5' },
    alive: true,
  },
  {
    description: 'no boot id recorded, pid gone: dead',
    recorded: { pid: 4242 },
    now: { bootId: 'boot-a', pidExists: false, startTime: undefined },
    alive: false,
  },
];

describe('ownerVerdict', () => {
  it.each(rows)('$description', ({ recorded: r, now, alive }) => {
    const verdict = ownerVerdict(r, now);
    expect(verdict.alive).toBe(alive);
    expect(verdict.reason).not.toBe('');
  });
});

describe('checkOwner on this machine', () => {
  it('finds this process alive and an exited child dead', async () => {
    expect((await checkOwner(await currentOwner())).alive).toBe(true);
    const child = spawnSync('true');
    expect(child.pid).toBeGreaterThan(0);
    expect((await checkOwner({ pid: child.pid! })).alive).toBe(false);
  });

  it('finds this pid dead once the boot id recorded differs', async () => {
    const me = await currentOwner();
    if (me.bootId === undefined) return; // no /proc here: nothing to compare
    expect((await checkOwner({ ...me, bootId: 'another-boot' })).alive).toBe(false);
  });
});
