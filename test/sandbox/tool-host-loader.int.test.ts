// The tool host starts lean: its loader answers the SDK toolset's one import of the SDK's root
// barrel with the SDK's error module, found by the SDK's file layout (`helpers/beta/json-schema.js`
// importing `../../index.js`, `core/error.js` defining `AnthropicError`). Where that layout is gone
// the loader lets the barrel load as written (the host still runs, on ten times the modules), and
// this test fails, so a layout change is seen. Runs the built host (`npm run build`) outside a
// sandbox, with a preload that lists the modules it loaded.
import { spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hostLayout } from '../../src/sandbox/host-layout.js';
import { encodeLine } from '../../src/sandbox/protocol.js';

describe('the tool host loader', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-host-loader-'));
  });
  afterEach(async () => {
    await fsp.rm(dir, { recursive: true, force: true });
  });

  it('runs the toolset without loading the SDK root barrel', async () => {
    const preload = path.join(dir, 'list-modules.cjs');
    await fsp.writeFile(
      preload,
      "process.on('exit', () => require('node:fs').writeSync(2, '\\nMODULES ' + JSON.stringify(Object.keys(require.cache)) + '\\n'));\n",
    );
    const host = spawn(process.execPath, ['-r', preload, hostLayout().hostEntry], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    host.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    host.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => host.once('exit', resolve));
    host.stdin.write(encodeLine({ t: 'init', workdir: dir, allowedRoots: [], readOnlyRoots: [], maxFileBytes: undefined }));
    host.stdin.write(encodeLine({ t: 'call', id: 1, tool: 'bash', input: { command: 'echo lean' } }));
    for (let i = 0; i < 200 && !stdout.includes('"result"'); i++) await new Promise((r) => setTimeout(r, 50));
    host.stdin.end();
    expect(await exited).toBe(0);
    expect(stdout).toContain('{"t":"result","id":1,"isError":false,"content":"lean"}');
    const listed = /MODULES (.*)\n/.exec(stderr);
    expect(listed).not.toBeNull();
    const modules = (JSON.parse(listed![1]!) as string[]).map((m) => m.split(path.sep).join('/'));
    const sdk = modules.filter((m) => m.includes('/@anthropic-ai/sdk/'));
    expect(sdk.some((m) => m.endsWith('/@anthropic-ai/sdk/core/error.js'))).toBe(true);
    expect(sdk.some((m) => m.endsWith('/@anthropic-ai/sdk/helpers/beta/json-schema.js'))).toBe(true);
    expect(sdk.filter((m) => m.endsWith('/@anthropic-ai/sdk/index.js'))).toEqual([]);
    // The barrel alone is about 300 modules.
    expect(modules.length).toBeLessThan(100);
  });
});
