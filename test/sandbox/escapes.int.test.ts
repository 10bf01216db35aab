// Escapes tried from inside a session's sandbox, with real bubblewrap and real processes: symlinks
// out of the workdir, the init's root through /proc, mounts, chmod of a read-only store, a
// background process meant to outlive the session, the network. Each asserts nothing outside
// changed.
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveSandboxOption, type SandboxSettings } from '../../src/sandbox/options.js';
import { resolveSandbox } from '../../src/sandbox/resolve.js';
import { SessionSandbox } from '../../src/sandbox/session-sandbox.js';

const log = pino({ level: 'silent' });

interface Rig {
  tmp: string;
  outside: string;
  work: string;
  rw: string;
  ro: string;
  sandbox: SessionSandbox;
  bash(command: string): Promise<string>;
  tool(name: string, input: unknown): Promise<{ ok: boolean; text: string }>;
}

async function rig(settings: SandboxSettings = {}, hide: string[] = []): Promise<Rig> {
  const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-escape-'));
  const outside = path.join(tmp, 'outside');
  const work = path.join(tmp, 'work');
  const rw = path.join(tmp, 'mnt', 'notes');
  const ro = path.join(tmp, 'mnt', 'policy');
  for (const d of [outside, work, rw, ro]) await fsp.mkdir(d, { recursive: true });
  await fsp.writeFile(path.join(outside, 'secret'), 'outside secret');
  await fsp.writeFile(path.join(ro, 'policy.md'), 'v1');
  const runtime = await resolveSandbox(resolveSandboxOption({ mode: 'bwrap', ...settings }), { log, concurrency: 1 });
  if (runtime.kind !== 'bwrap') throw new Error('the sandbox did not start');
  const sandbox = new SessionSandbox(
    runtime,
    { workdir: work, allowedRoots: [rw, ro], readOnlyRoots: [ro], maxFileBytes: undefined, hide },
    log,
  );
  const tools = sandbox.tools();
  const tool = async (name: string, input: unknown): Promise<{ ok: boolean; text: string }> => {
    const t = tools.find((x) => x.name === name)!;
    try {
      const out = await t.run(input, undefined);
      return { ok: true, text: typeof out === 'string' ? out : JSON.stringify(out) };
    } catch (e) {
      return { ok: false, text: (e as Error).message };
    }
  };
  return {
    tmp,
    outside,
    work,
    rw,
    ro,
    sandbox,
    tool,
    bash: async (command) => (await tool('bash', { command: `{ ${command}; } 2>&1; echo "exit=$?"` })).text,
  };
}

async function tree(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fsp.readdir(dir, { withFileTypes: true, recursive: true })) out.push(path.join(e.parentPath, e.name));
  return out.sort();
}

describe('escapes from a session sandbox', () => {
  let r: Rig;
  beforeEach(async () => {
    r = await rig();
  });
  afterEach(async () => {
    await r.sandbox.close();
    await fsp.rm(r.tmp, { recursive: true, force: true });
  });

  it('a symlink out of the workdir leads nowhere, for bash and for the file tools', async () => {
    const before = await tree(r.outside);
    const out = await r.bash(
      `ln -s ${r.outside} link && ls link/; cat link/secret; echo pwned > link/new; echo pwned > ${r.outside}/direct`,
    );
    expect(out).not.toContain('outside secret');
    expect(out).toMatch(/No such file or directory/);
    const read = await r.tool('read', { file_path: path.join(r.work, 'link', 'secret') });
    expect(read.ok).toBe(false);
    expect(read.text).not.toContain('outside secret');
    const write = await r.tool('write', { file_path: path.join(r.work, 'link', 'via-tool'), content: 'pwned' });
    expect(write.ok).toBe(false);
    expect(await tree(r.outside)).toEqual(before);
    expect(await fsp.readFile(path.join(r.outside, 'secret'), 'utf8')).toBe('outside secret');
  });

  it("the init's root in /proc is the sandbox's own root, and no worker process is visible", async () => {
    const out = await r.bash(`ls /proc/1/root/; cat /proc/1/root${r.outside}/secret; ls /proc | grep -E '^[0-9]+$' | wc -l`);
    expect(out).not.toContain('outside secret');
    expect(out).not.toMatch(/^home$|^root$|^var$/m);
    const lines = out.trim().split('\n');
    // init, the tool host, bash and this command's own processes: a handful, never the host's.
    expect(Number(lines[lines.length - 2])).toBeLessThan(10);
    const pids = await r.bash(`for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done`);
    expect(pids).not.toContain('vitest');
  });

  it('mounts are refused, so a read-only store stays read-only; chmod changes nothing', async () => {
    const out = await r.bash(
      `mount -t tmpfs none ${r.work}; mount -o remount,rw,bind ${r.ro}; mount --bind ${r.rw} ${r.ro}; unshare -m true; ` +
        `chmod 777 ${r.ro}; echo tampered > ${r.ro}/policy.md; touch ${r.ro}/new`,
    );
    expect(out).toMatch(/permission denied|must be superuser|Operation not permitted/i);
    expect(out).toMatch(/Read-only file system/);
    expect(await fsp.readFile(path.join(r.ro, 'policy.md'), 'utf8')).toBe('v1');
    expect(await fsp.readdir(r.ro)).toEqual(['policy.md']);
    expect(((await fsp.stat(r.ro)).mode & 0o777).toString(8)).not.toBe('777');
    // The write tool refuses the read-only folder too, before the file system would.
    const write = await r.tool('write', { file_path: path.join(r.ro, 'policy.md'), content: 'x' });
    expect(write).toMatchObject({ ok: false });
  });

  it('a background process does not outlive the session', async () => {
    const marker = `31.${process.pid}`;
    const out = await r.bash(
      `(while true; do date +%s%N >> ${r.rw}/ticks; sleep 0.05; done) > /dev/null 2>&1 & ` +
        `setsid nohup sleep ${marker} > /dev/null 2>&1 & ` +
        `(sleep 1; echo late > ${r.rw}/late) > /dev/null 2>&1 & disown -a; sleep 0.3; echo started`,
    );
    expect(out).toContain('started');
    const running = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
    expect(running).toContain(`sleep ${marker}`);
    await r.sandbox.close();
    expect(execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })).not.toContain(`sleep ${marker}`);
    const size = (await fsp.stat(path.join(r.rw, 'ticks'))).size;
    await new Promise((res) => setTimeout(res, 1_300));
    expect((await fsp.stat(path.join(r.rw, 'ticks'))).size).toBe(size);
    await expect(fsp.stat(path.join(r.rw, 'late'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('sees its store folders at their paths: writes to the read-write one land outside', async () => {
    const out = await r.bash(`echo kept > ${r.rw}/kept.md; ls ${path.dirname(r.rw)}; ls ${r.tmp}`);
    expect(out).toContain('exit=0');
    expect(await fsp.readFile(path.join(r.rw, 'kept.md'), 'utf8')).toBe('kept\n');
    // The temp folder holding everything shows only what was bound: no 'outside'.
    expect(out).not.toContain('outside');
  });
});

describe('what the sandbox options change', () => {
  it("network: 'none' reaches no listener on the host, where network: 'host' does", async () => {
    const server = net.createServer((s) => s.end('hello from the host\n'));
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const port = (server.address() as net.AddressInfo).port;
    const connect = `exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3`;
    try {
      for (const [network, reaches] of [
        ['host', true],
        ['none', false],
      ] as const) {
        const r = await rig({ network });
        try {
          const out = await r.bash(connect);
          if (reaches) expect(out).toContain('hello from the host');
          else expect(out).not.toContain('hello from the host');
        } finally {
          await r.sandbox.close();
          await fsp.rm(r.tmp, { recursive: true, force: true });
        }
      }
    } finally {
      server.close();
    }
  });

  it('a hidden path inside a visible folder shows nothing of its content', async () => {
    const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-hide-'));
    const work = path.join(tmp, 'work');
    await fsp.mkdir(path.join(work, 'state'), { recursive: true });
    await fsp.writeFile(path.join(work, 'state', 'journal'), 'private journal');
    await fsp.writeFile(path.join(work, 'key'), 'sk-ant-env-secret');
    const runtime = await resolveSandbox(resolveSandboxOption('bwrap'), { log, concurrency: 1 });
    if (runtime.kind !== 'bwrap') throw new Error('the sandbox did not start');
    const sandbox = new SessionSandbox(
      runtime,
      {
        workdir: work,
        allowedRoots: [],
        readOnlyRoots: [],
        maxFileBytes: undefined,
        hide: [path.join(work, 'state'), path.join(work, 'key')],
      },
      log,
    );
    try {
      const bash = sandbox.tools().find((t) => t.name === 'bash')!;
      const out = (await bash.run(
        { command: `{ ls -a state; cat state/journal; cat key; echo x > key; }  2>&1; echo "exit=$?"` },
        undefined,
      )) as string;
      expect(out).not.toContain('private journal');
      expect(out).not.toContain('sk-ant-env-secret');
      expect(await fsp.readFile(path.join(work, 'key'), 'utf8')).toBe('sk-ant-env-secret');
      expect(await fsp.readFile(path.join(work, 'state', 'journal'), 'utf8')).toBe('private journal');
    } finally {
      await sandbox.close();
      await fsp.rm(tmp, { recursive: true, force: true });
    }
  });
});
