// Pins that the worker never keeps its state folder inside the workdir (nor a workdir inside it).
// The sandbox hides a state folder that lies in the workdir only by mounting over its path: the
// agent can rename a folder above it (`mv .local .local.real`) and make a folder of its own there,
// which the worker then used as its state folder. Measured on the code before this guard, with
// workdir `<home>` and stateDir `<home>/.local/state/maw`: after one session ran that swap, the
// next session (another store) wrote its journal and the store's content (`content-cache/f2/…`)
// into the folder the agent made.
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stateDirOverlap } from '../../src/worker/state-dir-outside.js';
import { harness, type Harness } from './helpers.js';

describe('the state folder and the workdir', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('a workdir holding the state folder is refused before anything runs, naming both and the fix', async () => {
    const home = path.join(h.tmp, 'home');
    const stateDir = path.join(home, '.local', 'state', 'maw');
    await fsp.mkdir(stateDir, { recursive: true });
    expect(() => h.worker({ workdir: home, stateDir })).toThrow(
      expect.objectContaining({
        code: 'MAW_CONFIG',
        message: expect.stringContaining(`the state folder ${stateDir} is inside the workdir ${home}`),
      }),
    );
    expect(() => h.worker({ workdir: home, stateDir })).toThrow(/--state-dir/);
  });

  it('also when the workdir is spelt through a symlink, or lies inside the state folder', async () => {
    const real = path.join(h.tmp, 'real-home');
    await fsp.mkdir(path.join(real, 'state'), { recursive: true });
    const link = path.join(h.tmp, 'link-home');
    await fsp.symlink(real, link);
    expect(() => h.worker({ workdir: link, stateDir: path.join(real, 'state') })).toThrow(/is inside the workdir/);
    expect(() => h.worker({ workdir: path.join(real, 'state', 'work'), stateDir: path.join(real, 'state') })).toThrow(
      /the workdir .* is inside the state folder/,
    );
  });

  it('side by side they are accepted (the harness layout), and a shared prefix is not an overlap', () => {
    expect(() => h.worker()).not.toThrow();
    expect(stateDirOverlap('/srv/work-state', '/srv/work')).toBeUndefined();
    expect(stateDirOverlap('/srv/work/state', '/srv/work')).toBe('state-inside');
    expect(stateDirOverlap('/srv/state', '/srv/state/w')).toBe('folder-inside');
  });
});

describe("the state folder and the sandbox's read-write paths", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('a read-write path holding the state folder is refused; one beside it is accepted', () => {
    expect(() => h.worker({ sandbox: { mode: 'auto', readWritePaths: [h.tmp] } })).toThrow(
      expect.objectContaining({ code: 'MAW_CONFIG', message: expect.stringContaining(`read-write path ${h.tmp} and the state folder`) }),
    );
    expect(() => h.worker({ sandbox: { mode: 'auto', readWritePaths: [h.mountRoot] } })).not.toThrow();
  });
});
