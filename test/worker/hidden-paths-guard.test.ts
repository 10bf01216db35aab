// Pins that a hidden path (hidePaths, the CLI's credential files) never lies in a sub-folder of a
// folder the agent writes to. The sandbox hides it by mounting over it, which the agent cannot
// undo right in its workdir (the mount point cannot be renamed, removed or linked), but one folder
// down it renames the folder. Measured on the code before this guard, with hidePaths
// [<workdir>/secrets/api-key] and concurrency 1: session 1 ran `mv secrets s2`, and session 2's
// `cat s2/api-key` printed the key.
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { harness, type Harness } from './helpers.js';

describe('a hidden path inside a folder the agent writes to', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('in a sub-folder of the workdir or of a read-write path: refused, naming it and the fix', async () => {
    const key = path.join(h.workdir, 'secrets', 'api-key');
    await fsp.mkdir(path.dirname(key));
    await fsp.writeFile(key, 'sk-ant-the-operator-key');
    expect(() => h.worker({ sandbox: { mode: 'auto', hidePaths: [key] } })).toThrow(
      expect.objectContaining({
        code: 'MAW_CONFIG',
        message: expect.stringContaining(`the hidden path ${key} lies in a sub-folder of ${h.workdir}`),
      }),
    );
    const rw = path.join(h.tmp, 'shared');
    expect(() => h.worker({ sandbox: { mode: 'auto', readWritePaths: [rw], hidePaths: [path.join(rw, 'a', 'token')] } })).toThrow(
      /sub-folder of .*shared/,
    );
  });

  it('right in the workdir, outside it, or without a sandbox: accepted', () => {
    expect(() => h.worker({ sandbox: { mode: 'auto', hidePaths: [path.join(h.workdir, 'api-key')] } })).not.toThrow();
    expect(() => h.worker({ sandbox: { mode: 'auto', hidePaths: [path.join(h.tmp, 'keys', 'api-key')] } })).not.toThrow();
    expect(() => h.worker({ sandbox: 'none' })).not.toThrow();
  });
});
