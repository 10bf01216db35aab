/**
 * Pins the state folder: per user by default (XDG_STATE_HOME, else ~/.local/state; never the
 * shared temp folder), created 0700, and never written through a symlink: a symlinked state folder
 * or subfolder is refused with a ConfigError naming it and the fix, and a conflict copy never lands
 * outside it.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { ConflictCopies } from '../../../src/memory/disk/conflict-copies.js';
import { LocalDir } from '../../../src/memory/disk/local-dir.js';
import { defaultStateDir, ensureStateDir, ensureStateSubdir, writeFileDurable } from '../../../src/memory/disk/state-dir.js';

let tmp: string;
beforeEach(async () => {
  tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-state-'));
});
afterEach(async () => {
  await fsp.rm(tmp, { recursive: true, force: true });
});

describe('defaultStateDir', () => {
  const rows = [
    {
      description: 'XDG_STATE_HOME set: below it',
      env: { XDG_STATE_HOME: '/home/u/.state' },
      expected: '/home/u/.state/managed-agents-worker',
    },
    {
      description: 'XDG_STATE_HOME unset: ~/.local/state',
      env: {},
      expected: path.join(os.homedir(), '.local/state/managed-agents-worker'),
    },
    {
      description: 'a relative XDG_STATE_HOME is ignored (as the spec says)',
      env: { XDG_STATE_HOME: 'state' },
      expected: path.join(os.homedir(), '.local/state/managed-agents-worker'),
    },
  ];
  it.each(rows)('$description', ({ env, expected }) => {
    expect(defaultStateDir(env)).toBe(expected);
    expect(defaultStateDir(env).startsWith(os.tmpdir() + path.sep)).toBe(false);
  });
});

describe('ensureStateDir', () => {
  it('creates the folder (and its parents) 0700', async () => {
    const dir = await ensureStateDir(path.join(tmp, 'a', 'b'));
    expect((await fsp.stat(dir)).mode & 0o777).toBe(0o700);
    expect((await fsp.stat(path.join(tmp, 'a'))).mode & 0o777).toBe(0o700);
  });

  it('refuses a state folder that is a symlink, naming it and the fix', async () => {
    await fsp.mkdir(path.join(tmp, 'real'));
    await fsp.symlink(path.join(tmp, 'real'), path.join(tmp, 'link'));
    const err = await ensureStateDir(path.join(tmp, 'link')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/link is a symlink.*stateDir \(--state-dir\)/s);
  });

  it('refuses a subfolder swapped for a symlink; nothing is written through it', async () => {
    const state = await ensureStateDir(path.join(tmp, 'state'));
    const outside = path.join(tmp, 'outside');
    await fsp.mkdir(outside);
    await fsp.symlink(outside, path.join(state, 'conflicts'));
    await expect(ensureStateSubdir(state, ['conflicts', 'store'])).rejects.toBeInstanceOf(ConfigError);
    const mount = path.join(tmp, 'mount');
    await fsp.mkdir(mount);
    await fsp.writeFile(path.join(mount, 'a.md'), 'agent bytes');
    await expect(new ConflictCopies(state).save(new LocalDir(mount), 'memstore_1', 'a.md', 'stamp')).rejects.toBeInstanceOf(ConfigError);
    expect(await fsp.readdir(outside)).toEqual([]);
  });

  it('writes a file durably, replacing a symlink at its name instead of following it', async () => {
    const state = await ensureStateDir(path.join(tmp, 'state'));
    const victim = path.join(tmp, 'victim');
    await fsp.writeFile(victim, 'untouched');
    await fsp.symlink(victim, path.join(state, 'entry.json'));
    await writeFileDurable(path.join(state, 'entry.json'), '{"ok":true}');
    expect(await fsp.readFile(victim, 'utf8')).toBe('untouched');
    expect(fs.lstatSync(path.join(state, 'entry.json')).isFile()).toBe(true);
    expect((await fsp.stat(path.join(state, 'entry.json'))).mode & 0o777).toBe(0o600);
  });
});
