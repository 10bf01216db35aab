// Pins `--version` and `-v`: both print the version from package.json and exit 0, in-process and
// from the executable.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/cli.js';
import { commands } from '../../src/cli/commands.js';
import { EXIT } from '../../src/cli/exit-codes.js';
import type { CliIo } from '../../src/cli/io.js';
import { childEnv, REPO_ROOT, spawnCli } from './spawn-cli.js';

const VERSION = (JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;

function io(): CliIo & { out: string; err: string } {
  const o = {
    out: '',
    err: '',
    env: {},
    cwd: process.cwd(),
    stdout: (t: string) => void (o.out += t),
    stderr: (t: string) => void (o.err += t),
  };
  return o;
}

describe('the version flag', () => {
  it.each(['--version', '-v'])('"%s" prints the package version and exits 0', async (flag) => {
    const o = io();
    expect(await runCli([flag], o, commands())).toBe(EXIT.OK);
    expect(o.out).toBe(`${VERSION}\n`);
    expect(o.err).toBe('');
  });

  it('the executable prints the same version', async () => {
    const run = spawnCli(['--version'], childEnv({}));
    expect((await run.exited).code).toBe(0);
    expect(run.stdout()).toBe(`${VERSION}\n`);
  });
});
